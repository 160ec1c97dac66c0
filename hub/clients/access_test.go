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
	p := PlanAccess(want, empty(), true)
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
	if again := PlanAccess(want, st, true); len(again.Changes) != 0 {
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
	st := apply(empty(), PlanAccess(before, empty(), true))
	st.Users["human"] = []string{"human-role"}
	st.Roles["human-role"] = []etcdops.Permission{{Type: etcdops.PermRead, Key: "x"}}
	after := []Grant{
		{Client: "kas", User: "kube-apiserver", Role: etcdfedv1.ClientRoleReadOnly},
		{Client: "admin", User: "admin", Role: etcdfedv1.ClientRoleReadWrite},
		{Client: "app", User: "app", Role: etcdfedv1.ClientRoleReadWrite, Prefix: "/b/"},
		{Client: "squatter", User: "human", Role: etcdfedv1.ClientRoleRoot},
	}
	p := PlanAccess(after, st, true)
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
	if again := PlanAccess(after, st, true); len(again.Changes) != 0 {
		t.Fatalf("not idempotent: %v", changes(again))
	}
	if off := PlanAccess(after, st, false); !slices.Equal(changes(off), []string{"Disable"}) {
		t.Errorf("spec.tls.auth Disabled: %v, want Disable only", changes(off))
	}
}

// While a consumer would lose its access (its user is a human's),
// authentication is not turned on.
func TestPlanAccessHoldsEnable(t *testing.T) {
	st := empty()
	st.Users["app"] = nil
	p := PlanAccess([]Grant{{Client: "app", User: "app", Role: etcdfedv1.ClientRoleReadWrite}}, st, true)
	if slices.Contains(changes(p), "Enable") || p.Refused["app"] == "" {
		t.Fatalf("changes %v, refused %v: want no Enable and app refused", changes(p), p.Refused)
	}
}
