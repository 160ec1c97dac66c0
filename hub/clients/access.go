package clients

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
)

// Access: etcd's authentication kept in line with spec.clients and the
// ring's members. etcd takes the user of a request from its client
// certificate's common name, so every certificate the hub issues is a
// user: root and etcdfed-hub (the hub's own) with the root role, each
// consumer with a role of its own, etcdfed-client-<name>, that holds its
// permission (ReadWrite or ReadOnly on keyPrefix) or marks it as the hub's
// (Root: the user also gets root), and each member (its certificate's
// common name is its name) with the root role and the etcdfed-member
// role that marks it as the hub's: the member's preStop hook (etcdfed-init
// prestop) moves leadership off it before it stops, and etcd allows
// MoveLeader to root alone. A member's certificate already carries the
// ring's peer name, so it speaks raft as any member and can propose
// entries etcd applies under whatever user name it writes into them: the
// root role gives it nothing it lacked (docs/tenancy.md). The hub manages
// exactly the users that hold such a role, and those roles; any other
// user or role is a human's and is left alone.
//
// Order, so that turning authentication on breaks no declared consumer
// and no step undoes another: users and roles are added and granted
// first, removed consumers' users and roles deleted next (revocation takes
// effect at once, whatever their certificates say), and authentication is
// turned on last, only when every consumer has its user. Each pass
// compares etcd's state with the wanted one and makes only the
// differences, so it is idempotent and resumes after any failure.

// Grant is one consumer's wanted access.
type Grant struct {
	// Client is the spec.clients[] name; User the certificate's common
	// name.
	Client, User string
	Role         etcdfedv1.ClientRole
	Prefix       string
}

// roleName is the etcd role of a consumer.
func roleName(client string) string { return etcdfedv1.EtcdClientRolePrefix + client }

// Grants resolves spec.clients into the wanted access. A consumer whose
// common name is a member's name (Refusal) is not wanted: that user is
// the member's.
func Grants(ec *etcdfedv1.EtcdCluster) []Grant {
	var out []Grant
	for _, c := range ec.Spec.Clients {
		g := Grant{Client: c.Name, User: TargetOf(ec, c).CommonName, Role: c.Role, Prefix: c.KeyPrefix}
		if IsMemberName(ec, g.User) {
			continue
		}
		if g.Role == "" {
			g.Role = etcdfedv1.ClientRoleReadWrite
		}
		out = append(out, g)
	}
	return out
}

// permission is a grant's key range: keyPrefix's, or every key.
func (g Grant) permission() (etcdops.Permission, bool) {
	var typ string
	switch g.Role {
	case etcdfedv1.ClientRoleRoot:
		return etcdops.Permission{}, false
	case etcdfedv1.ClientRoleReadOnly:
		typ = etcdops.PermRead
	default:
		typ = etcdops.PermReadWrite
	}
	if g.Prefix == "" {
		// From the lowest key on: every key.
		return etcdops.Permission{Type: typ, Key: "\x00", RangeEnd: "\x00"}, true
	}
	return etcdops.Permission{Type: typ, Key: g.Prefix, RangeEnd: clientv3.GetPrefixRangeEnd(g.Prefix)}, true
}

// MemberUsers are the etcd users of the ring's members: their names
// (status.members), each its certificate's common name.
func MemberUsers(ec *etcdfedv1.EtcdCluster) []string {
	var out []string
	for _, m := range ec.Status.Members {
		if m.Name != "" && m.Name != etcdfedv1.EtcdRootUser && m.Name != etcdfedv1.EtcdHubUser {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// IsMemberName says whether name is, or may become, the name of one of
// the ring's members (<etcdcluster>-<ordinal>, or a member in status),
// and so its etcd user with the root role.
func IsMemberName(ec *etcdfedv1.EtcdCluster, name string) bool {
	if ord, ok := strings.CutPrefix(name, ec.Name+"-"); ok && ord != "" && strings.Trim(ord, "0123456789") == "" {
		return true
	}
	return slices.ContainsFunc(ec.Status.Members, func(m etcdfedv1.MemberStatus) bool { return m.Name == name })
}

// AccessPlan is PlanAccess's answer.
type AccessPlan struct {
	// Changes to make, in order.
	Changes []etcdops.AuthChange
	// Refused names consumers whose user exists and is not the hub's
	// (a human's): it is left alone, and authentication is not turned on
	// while one is refused (it would lose its access).
	Refused map[string]string
	// MembersLeftAlone names members whose user exists and is not the
	// hub's (a human's): it gets no root role, and the member's preStop
	// hook cannot move leadership (etcd's own shutdown does, later).
	MembersLeftAlone map[string]string
}

// PlanAccess compares etcd's state with the wanted grants and member
// users (MemberUsers); on says whether authentication is wanted
// (spec.tls.auth).
func PlanAccess(want []Grant, members []string, have etcdops.AuthState, on bool) AccessPlan {
	p := AccessPlan{Refused: map[string]string{}, MembersLeftAlone: map[string]string{}}
	add := func(c etcdops.AuthChange) { p.Changes = append(p.Changes, c) }
	if !on {
		if have.Enabled {
			add(etcdops.AuthChange{Op: etcdops.AuthDisable})
		}
		return p
	}
	hasRole := func(user, role string) bool { return slices.Contains(have.Users[user], role) }
	// The hub's own users first: etcd refuses to turn authentication on
	// without root, and the hub must stay root once it is on.
	for _, u := range []string{etcdfedv1.EtcdRootUser, etcdfedv1.EtcdHubUser} {
		if _, ok := have.Users[u]; !ok {
			add(etcdops.AuthChange{Op: etcdops.AuthAddUser, User: u})
		}
		if !hasRole(u, etcdops.RootRole) {
			add(etcdops.AuthChange{Op: etcdops.AuthGrantRole, User: u, Role: etcdops.RootRole})
		}
	}
	// Each member's user: root (MoveLeader) and the role that marks it as
	// the hub's. A user of that name the hub did not create for the
	// member (a human's, or a consumer's that took the name before the
	// member did, whose certificates may still be in use) never becomes
	// root: it is left alone and reported.
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m] = true
	}
	if _, ok := have.Roles[etcdfedv1.EtcdMemberRole]; !ok && len(members) > 0 {
		add(etcdops.AuthChange{Op: etcdops.AuthAddRole, Role: etcdfedv1.EtcdMemberRole})
	}
	for _, m := range slices.Sorted(maps.Keys(isMember)) {
		roles, exists := have.Users[m]
		if exists && !slices.Contains(roles, etcdfedv1.EtcdMemberRole) {
			p.MembersLeftAlone[m] = fmt.Sprintf("etcd user %s exists and is not the hub's for the member (it holds no %s role: a human's or a consumer's, whose certificates carry the name): it gets no root role and the member's preStop hook cannot move leadership; delete the user once no such certificate is in use", m, etcdfedv1.EtcdMemberRole)
			continue
		}
		if !exists {
			add(etcdops.AuthChange{Op: etcdops.AuthAddUser, User: m})
		}
		if !hasRole(m, etcdfedv1.EtcdMemberRole) {
			add(etcdops.AuthChange{Op: etcdops.AuthGrantRole, User: m, Role: etcdfedv1.EtcdMemberRole})
		}
		if !hasRole(m, etcdops.RootRole) {
			add(etcdops.AuthChange{Op: etcdops.AuthGrantRole, User: m, Role: etcdops.RootRole})
		}
	}
	wanted := map[string]Grant{} // by role
	for _, g := range want {
		if isMember[g.User] {
			continue // the member's user (Grants leaves such a consumer out)
		}
		role := roleName(g.Client)
		wanted[role] = g
		roles, exists := have.Users[g.User]
		if exists && !slices.ContainsFunc(roles, managedRole) {
			p.Refused[g.Client] = fmt.Sprintf("etcd user %s exists and the hub did not create it (it holds no %s* role): rename the consumer (commonName) or delete the user", g.User, etcdfedv1.EtcdClientRolePrefix)
			continue
		}
		if _, ok := have.Roles[role]; !ok {
			add(etcdops.AuthChange{Op: etcdops.AuthAddRole, Role: role})
		}
		perm, hasPerm := g.permission()
		for _, pp := range have.Roles[role] {
			if !hasPerm || pp != perm {
				add(etcdops.AuthChange{Op: etcdops.AuthRevokePermission, Role: role, Perm: pp})
			}
		}
		if hasPerm && !slices.Contains(have.Roles[role], perm) {
			add(etcdops.AuthChange{Op: etcdops.AuthGrantPermission, Role: role, Perm: perm})
		}
		if !exists {
			add(etcdops.AuthChange{Op: etcdops.AuthAddUser, User: g.User})
		}
		if !hasRole(g.User, role) {
			add(etcdops.AuthChange{Op: etcdops.AuthGrantRole, User: g.User, Role: role})
		}
		switch root := hasRole(g.User, etcdops.RootRole); {
		case g.Role == etcdfedv1.ClientRoleRoot && !root:
			add(etcdops.AuthChange{Op: etcdops.AuthGrantRole, User: g.User, Role: etcdops.RootRole})
		case g.Role != etcdfedv1.ClientRoleRoot && root:
			add(etcdops.AuthChange{Op: etcdops.AuthRevokeRole, User: g.User, Role: etcdops.RootRole})
		}
		// Another consumer's role on this user (the entry was renamed, or
		// commonName moved to another entry): revoked.
		for _, r := range roles {
			if managedRole(r) && r != role {
				add(etcdops.AuthChange{Op: etcdops.AuthRevokeRole, User: g.User, Role: r})
			}
		}
	}
	// Removed consumers and members: their users go at once (a user of a
	// wanted consumer under another common name too), then consumers'
	// roles.
	for _, u := range slices.Sorted(maps.Keys(have.Users)) {
		if u == etcdfedv1.EtcdRootUser || u == etcdfedv1.EtcdHubUser || isMember[u] {
			continue
		}
		roles := have.Users[u]
		if slices.Contains(roles, etcdfedv1.EtcdMemberRole) {
			add(etcdops.AuthChange{Op: etcdops.AuthDeleteUser, User: u})
			continue
		}
		if !slices.ContainsFunc(roles, managedRole) {
			continue
		}
		keep := false
		for _, r := range roles {
			if g, ok := wanted[r]; ok && g.User == u {
				keep = true
			}
		}
		if !keep && !slices.ContainsFunc(want, func(g Grant) bool { return g.User == u }) {
			add(etcdops.AuthChange{Op: etcdops.AuthDeleteUser, User: u})
		}
	}
	for _, r := range slices.Sorted(maps.Keys(have.Roles)) {
		if _, ok := wanted[r]; managedRole(r) && !ok {
			add(etcdops.AuthChange{Op: etcdops.AuthDeleteRole, Role: r})
		}
	}
	if !have.Enabled && len(p.Refused) == 0 {
		add(etcdops.AuthChange{Op: etcdops.AuthEnable})
	}
	return p
}

func managedRole(r string) bool { return strings.HasPrefix(r, etcdfedv1.EtcdClientRolePrefix) }
