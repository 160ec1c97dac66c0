// Package installtest starts real apiservers for tests of what
// cli/install installs: fresh ones without the etcdfed CRDs (the
// install brings them), and a hub with one member cluster joined.
package installtest

import (
	"context"
	"testing"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// Clusters starts one fresh apiserver per name, without the etcdfed
// CRDs, and stops them when the test ends.
func Clusters(t testing.TB, names ...string) []*testenv.Cluster {
	t.Helper()
	testenv.SkipIfShort(t, "kube-apiserver")
	cs, err := testenv.Start(context.Background(), testenv.Options{WithoutCRDs: true}, names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Stop()
		}
	})
	return cs
}

// HubAndMember starts a hub and a member cluster, installs the hub's side
// (hub external) and joins the member as "member-1" (spoke external),
// after edit changes the join's options when it is not nil.
func HubAndMember(t testing.TB, edit func(*install.JoinOptions)) (hub, member *testenv.Cluster) {
	t.Helper()
	cs := Clusters(t, "hub", "member")
	hub, member = cs[0], cs[1]
	ctx := context.Background()
	if err := install.InstallHub(ctx, install.HubInstallOptions{Hub: hub.Config, HubOptions: install.HubOptions{External: true}}); err != nil {
		t.Fatal(err)
	}
	o := install.JoinOptions{MemberOptions: install.MemberOptions{Name: "member-1", External: true}, Hub: hub.Config, Member: member.Config}
	if edit != nil {
		edit(&o)
	}
	if err := install.Join(ctx, o); err != nil {
		t.Fatal(err)
	}
	return hub, member
}
