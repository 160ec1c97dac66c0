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

// Access: etcd's authentication kept in line with spec.clients. etcd takes
// the user of a request from its client certificate's common name, so
// every certificate the hub issues is a user: root and etcdfed-hub (the
// hub's own) with the root role, each consumer with a role of its own,
// etcdfed-client-<name>, that holds its permission (ReadWrite or ReadOnly
// on keyPrefix) or marks it as the hub's (Root: the user also gets root).
// The hub manages exactly the users that hold such a role, and those
// roles; any other user or role is a human's and is left alone.
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

// Grants resolves spec.clients into the wanted access.
func Grants(ec *etcdfedv1.EtcdCluster) []Grant {
	var out []Grant
	for _, c := range ec.Spec.Clients {
		g := Grant{Client: c.Name, User: TargetOf(ec, c).CommonName, Role: c.Role, Prefix: c.KeyPrefix}
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

// AccessPlan is PlanAccess's answer.
type AccessPlan struct {
	// Changes to make, in order.
	Changes []etcdops.AuthChange
	// Refused names consumers whose user exists and is not the hub's
	// (a human's): it is left alone, and authentication is not turned on
	// while one is refused (it would lose its access).
	Refused map[string]string
}

// PlanAccess compares etcd's state with the wanted grants; on says
// whether authentication is wanted (spec.tls.auth).
func PlanAccess(want []Grant, have etcdops.AuthState, on bool) AccessPlan {
	p := AccessPlan{Refused: map[string]string{}}
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
	wanted := map[string]Grant{} // by role
	for _, g := range want {
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
	// Removed consumers: their users go at once (a user of a wanted
	// consumer under another common name too), then their roles.
	for _, u := range slices.Sorted(maps.Keys(have.Users)) {
		if u == etcdfedv1.EtcdRootUser || u == etcdfedv1.EtcdHubUser {
			continue
		}
		roles := have.Users[u]
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
