package etcdcluster

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// TestSpecChanges: what a Roll's reason says the new spec changes, field
// by field with the old and new value; nothing for what restarts nothing
// (the bootstrap, the disruption grant).
func TestSpecChanges(t *testing.T) {
	base := func() *etcdfedv1.EtcdMember {
		return &etcdfedv1.EtcdMember{Spec: etcdfedv1.EtcdMemberSpec{MemberName: "main-0", Image: "etcd:v3.6.16", Version: "3.6.16",
			TLS: etcdfedv1.MemberTLS{Mode: etcdfedv1.TLSEnabled, SecretName: "s"}}}
	}
	for _, c := range []struct {
		name   string
		change func(*etcdfedv1.EtcdMember)
		want   string
	}{
		{name: "nothing", change: func(*etcdfedv1.EtcdMember) {}},
		{name: "bootstrap and disruption restart nothing", change: func(m *etcdfedv1.EtcdMember) {
			m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialClusterState: etcdfedv1.InitialClusterExisting}
			m.Spec.Disruption = &etcdfedv1.MemberDisruption{Allowed: true}
		}},
		{name: "timing", change: func(m *etcdfedv1.EtcdMember) {
			m.Spec.Etcd.HeartbeatIntervalMillis, m.Spec.Etcd.ElectionTimeoutMillis = ptr.To[int32](250), ptr.To[int32](2500)
		}, want: "spec.etcd.heartbeatIntervalMillis unset -> 250, spec.etcd.electionTimeoutMillis unset -> 2500"},
		{name: "a flag of the TLS settings", change: func(m *etcdfedv1.EtcdMember) { m.Spec.TLS.RevocationList = true },
			want: "spec.tls.revocationList unset -> true"},
		{name: "a quantity", change: func(m *etcdfedv1.EtcdMember) { q := resource.MustParse("8Gi"); m.Spec.Etcd.QuotaBackendBytes = &q },
			want: "spec.etcd.quotaBackendBytes unset -> 8Gi"},
		{name: "bounded", change: func(m *etcdfedv1.EtcdMember) {
			m.Spec.Image, m.Spec.Version, m.Spec.DNSName, m.Spec.Zone, m.Spec.TLS.CAHash = "etcd:v3.6.17", "3.6.17", "main-0-i4.main.etcd.test", "zone-2", "abc"
		}, want: "spec.image etcd:v3.6.16 -> etcd:v3.6.17, spec.version 3.6.16 -> 3.6.17, spec.dnsName unset -> main-0-i4.main.etcd.test, spec.zone unset -> zone-2, and 1 more"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := base()
			c.change(want)
			if got := specChanges(base(), want); got != c.want {
				t.Errorf("specChanges = %q, want %q", got, c.want)
			}
			if restarts(base(), want) != (c.want != "") {
				t.Errorf("restarts = %v, but specChanges names %q", c.want == "", c.want)
			}
		})
	}
}

// TestRollSaysWhatChanged: the Roll a change of timing begins says, in
// the reason the hub logs, which flags change from what to what (issue
// 38: a roll of every member after a move, and nothing in the hub's log
// said why).
func TestRollSaysWhatChanged(t *testing.T) {
	s := ring()
	withRoundTrips(s, 200, 0)
	settled(s)
	d := decide(s)
	if d.plan.Action != planner.ActBegin || d.plan.Operation == nil || d.plan.Operation.Type != planner.OpRoll {
		t.Fatalf("plan %s %+v (%s), want a Roll", d.plan.Action, d.plan.Operation, d.plan.Reason)
	}
	if want := "spec.etcd.heartbeatIntervalMillis unset -> 250, spec.etcd.electionTimeoutMillis unset -> 2500"; !strings.Contains(d.plan.Reason, want) {
		t.Errorf("the Roll's reason %q does not name what changes (%s)", d.plan.Reason, want)
	}
}
