package clients

import (
	"slices"
	"strings"
	"testing"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
)

func changes(p AccessPlan) []string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.String())
	}
	return out
}

// apply plays a plan on a state as etcd would.
func apply(st etcdops.AuthState, p AccessPlan) etcdops.AuthState {
	for _, c := range p.Changes {
		switch c.Op {
		case etcdops.AuthAddUser:
			st.Users[c.User] = nil
		case etcdops.AuthAddRole:
			st.Roles[c.Role] = nil
		case etcdops.AuthGrantPermission:
			st.Roles[c.Role] = append(st.Roles[c.Role], c.Perm)
		case etcdops.AuthRevokePermission:
			st.Roles[c.Role] = slices.DeleteFunc(st.Roles[c.Role], func(p etcdops.Permission) bool { return p == c.Perm })
		case etcdops.AuthGrantRole:
			st.Users[c.User] = append(st.Users[c.User], c.Role)
		case etcdops.AuthRevokeRole:
			st.Users[c.User] = slices.DeleteFunc(st.Users[c.User], func(r string) bool { return r == c.Role })
		case etcdops.AuthDeleteUser:
			delete(st.Users, c.User)
		case etcdops.AuthDeleteRole:
			delete(st.Roles, c.Role)
		case etcdops.AuthEnable:
			st.Enabled = true
		case etcdops.AuthDisable:
			st.Enabled = false
		}
	}
	return st
}

func empty() etcdops.AuthState {
	return etcdops.AuthState{Users: map[string][]string{}, Roles: map[string][]etcdops.Permission{"root": nil}}
}

// Turning authentication on: the hub's users (root first: etcd refuses
// without it), then each consumer's role with its permission and its
// user, and authentication last. A second plan on the result is empty.
func TestPlanAccessEnables(t *testing.T) {
	want := []Grant{
		{Client: "kas", User: "kube-apiserver", Role: etcdfedv1.ClientRoleReadWrite, Prefix: "/registry/"},
		{Client: "audit", User: "audit", Role: etcdfedv1.ClientRoleReadOnly},
		{Client: "admin", User: "admin", Role: etcdfedv1.ClientRoleRoot},
	}
	p := PlanAccess(want, nil, empty(), true)
	got := changes(p)
	wantChanges := []string{
		"AddUser root", "GrantRole root to root", "AddUser etcdfed-hub", "GrantRole root to etcdfed-hub",
		"AddRole etcdfed-client-kas", `GrantPermission READWRITE ["/registry/", "/registry0") on etcdfed-client-kas`, "AddUser kube-apiserver", "GrantRole etcdfed-client-kas to kube-apiserver",
		"AddRole etcdfed-client-audit", `GrantPermission READ ["\x00", "\x00") on etcdfed-client-audit`, "AddUser audit", "GrantRole etcdfed-client-audit to audit",
		"AddRole etcdfed-client-admin", "AddUser admin", "GrantRole etcdfed-client-admin to admin", "GrantRole root to admin",
		"Enable",
	}
	if !slices.Equal(got, wantChanges) {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantChanges, "\n"))
	}
	st := apply(empty(), p)
	if again := PlanAccess(want, nil, st, true); len(again.Changes) != 0 {
		t.Fatalf("not idempotent: %v", changes(again))
	}
}

// Changes after authentication is on: a role changed (ReadWrite to
// ReadOnly, Root to ReadWrite), a prefix changed, a consumer removed (its
// user and role deleted), a consumer whose user a human created (left
// alone, reported), a human's own users and roles untouched.
func TestPlanAccessChanges(t *testing.T) {
	before := []Grant{
		{Client: "kas", User: "kube-apiserver", Role: etcdfedv1.ClientRoleReadWrite},
		{Client: "admin", User: "admin", Role: etcdfedv1.ClientRoleRoot},
		{Client: "gone", User: "gone", Role: etcdfedv1.ClientRoleReadWrite},
		{Client: "app", User: "app", Role: etcdfedv1.ClientRoleReadWrite, Prefix: "/a/"},
	}
	st := apply(empty(), PlanAccess(before, nil, empty(), true))
	st.Users["human"] = []string{"human-role"}
	st.Roles["human-role"] = []etcdops.Permission{{Type: etcdops.PermRead, Key: "x"}}
	after := []Grant{
		{Client: "kas", User: "kube-apiserver", Role: etcdfedv1.ClientRoleReadOnly},
		{Client: "admin", User: "admin", Role: etcdfedv1.ClientRoleReadWrite},
		{Client: "app", User: "app", Role: etcdfedv1.ClientRoleReadWrite, Prefix: "/b/"},
		{Client: "squatter", User: "human", Role: etcdfedv1.ClientRoleRoot},
	}
	p := PlanAccess(after, nil, st, true)
	got := changes(p)
	for _, w := range []string{
		`RevokePermission READWRITE ["\x00", "\x00") on etcdfed-client-kas`, `GrantPermission READ ["\x00", "\x00") on etcdfed-client-kas`,
		"RevokeRole root to admin", `GrantPermission READWRITE ["\x00", "\x00") on etcdfed-client-admin`,
		`RevokePermission READWRITE ["/a/", "/a0") on etcdfed-client-app`, `GrantPermission READWRITE ["/b/", "/b0") on etcdfed-client-app`,
		"DeleteUser gone", "DeleteRole etcdfed-client-gone",
	} {
		if !slices.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	for _, c := range got {
		if strings.Contains(c, "human") {
			t.Errorf("touches a human's user or role: %s", c)
		}
	}
	if p.Refused["squatter"] == "" {
		t.Error("a consumer whose user a human created is not reported")
	}
	st = apply(st, p)
	if again := PlanAccess(after, nil, st, true); len(again.Changes) != 0 {
		t.Fatalf("not idempotent: %v", changes(again))
	}
	if off := PlanAccess(after, nil, st, false); !slices.Equal(changes(off), []string{"Disable"}) {
		t.Errorf("spec.tls.auth Disabled: %v, want Disable only", changes(off))
	}
}

// While a consumer would lose its access (its user is a human's),
// authentication is not turned on.
func TestPlanAccessHoldsEnable(t *testing.T) {
	st := empty()
	st.Users["app"] = nil
	p := PlanAccess([]Grant{{Client: "app", User: "app", Role: etcdfedv1.ClientRoleReadWrite}}, nil, st, true)
	if slices.Contains(changes(p), "Enable") || p.Refused["app"] == "" {
		t.Fatalf("changes %v, refused %v: want no Enable and app refused", changes(p), p.Refused)
	}
}

// Each member's certificate (its common name is the member's name) is an
// etcd user with the root role, so that its preStop hook may move
// leadership (MoveLeader is root's): added before authentication is
// turned on, marked by the etcdfed-member role, deleted when the member
// leaves the ring. A user of a member's name the hub did not make for
// the member (a human's, a consumer's) never becomes root.
func TestPlanAccessMembers(t *testing.T) {
	want := []Grant{{Client: "app", User: "app", Role: etcdfedv1.ClientRoleReadWrite}}
	p := PlanAccess(want, []string{"main-0", "main-1"}, empty(), true)
	got := changes(p)
	wantChanges := []string{
		"AddUser root", "GrantRole root to root", "AddUser etcdfed-hub", "GrantRole root to etcdfed-hub",
		"AddRole etcdfed-member",
		"AddUser main-0", "GrantRole etcdfed-member to main-0", "GrantRole root to main-0",
		"AddUser main-1", "GrantRole etcdfed-member to main-1", "GrantRole root to main-1",
		"AddRole etcdfed-client-app", `GrantPermission READWRITE ["\x00", "\x00") on etcdfed-client-app`, "AddUser app", "GrantRole etcdfed-client-app to app",
		"Enable",
	}
	if !slices.Equal(got, wantChanges) {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantChanges, "\n"))
	}
	st := apply(empty(), p)
	if again := PlanAccess(want, []string{"main-0", "main-1"}, st, true); len(again.Changes) != 0 {
		t.Fatalf("not idempotent: %v", changes(again))
	}

	// main-1 replaced by main-2: main-1's user goes, main-2's comes.
	p = PlanAccess(want, []string{"main-0", "main-2"}, st, true)
	wantChanges = []string{"AddUser main-2", "GrantRole etcdfed-member to main-2", "GrantRole root to main-2", "DeleteUser main-1"}
	if got := changes(p); !slices.Equal(got, wantChanges) {
		t.Fatalf("member replaced: changes %v, want %v", got, wantChanges)
	}
	st = apply(st, p)

	// A human's user and a consumer's user of a member's name: left
	// alone, no root.
	st.Users["main-3"] = nil
	st.Users["main-4"] = []string{"etcdfed-client-old"}
	st.Roles["etcdfed-client-old"] = nil
	p = PlanAccess(want, []string{"main-0", "main-2", "main-3", "main-4"}, st, true)
	for _, c := range changes(p) {
		if strings.Contains(c, "main-3") || strings.Contains(c, "main-4") {
			t.Errorf("a user the hub did not make for the member changed: %s", c)
		}
	}
	if p.MembersLeftAlone["main-3"] == "" || p.MembersLeftAlone["main-4"] == "" {
		t.Errorf("members left alone %v, want main-3 and main-4", p.MembersLeftAlone)
	}

	// A grant whose user is a member's is no consumer's: the member keeps
	// its user.
	p = PlanAccess(append(want, Grant{Client: "sneaky", User: "main-0", Role: etcdfedv1.ClientRoleReadOnly}), []string{"main-0", "main-2"}, apply(empty(), PlanAccess(want, []string{"main-0", "main-2"}, empty(), true)), true)
	for _, c := range changes(p) {
		if strings.Contains(c, "main-0") {
			t.Errorf("a consumer named like a member changed the member's user: %s", c)
		}
	}
	// Authentication off: no member users wanted.
	if off := PlanAccess(want, []string{"main-0"}, st, false); !slices.Equal(changes(off), []string{"Disable"}) {
		t.Errorf("auth off: %v", changes(off))
	}
}

// A consumer whose common name is, or may become, a member's name is
// refused (it would share the member's root user) and wanted by no grant.
func TestRefusalMemberName(t *testing.T) {
	ec := &etcdfedv1.EtcdCluster{}
	ec.Name, ec.Namespace = "main", "team-a"
	ec.Status.Members = []etcdfedv1.MemberStatus{{Name: "adopted-a"}}
	for cn, refused := range map[string]bool{"main-0": true, "main-12": true, "adopted-a": true, "main-": false, "main-x": false, "main": false, "app": false, "other-1": false} {
		c := etcdfedv1.ClientSpec{Name: "c", CommonName: cn}
		why := Refusal(ec, c, TargetOf(ec, c), Policy{})
		if (why != "") != refused {
			t.Errorf("commonName %s: refusal %q, want refused %v", cn, why, refused)
		}
		ec.Spec.Clients = []etcdfedv1.ClientSpec{c}
		if got := len(Grants(ec)) == 0; got != refused {
			t.Errorf("commonName %s: grants %v, want none %v", cn, Grants(ec), refused)
		}
	}
}
