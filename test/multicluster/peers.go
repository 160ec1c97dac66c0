package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// WaitForPeerCauseInput names an EtcdCluster and the peer-connection cause
// its conditions must name.
type WaitForPeerCauseInput struct {
	Hub             *Cluster
	Namespace, Name string
	// Reason is one of etcdfedv1.PeerConnectionProblems.
	Reason  string
	Timeout time.Duration
}

// WaitForPeerCause waits until the EtcdCluster's Degraded condition names
// Reason (as its reason) and its Progressing condition names it too, and
// returns the EtcdCluster.
func WaitForPeerCause(ctx context.Context, in WaitForPeerCauseInput) (*etcdfedv1.EtcdCluster, error) {
	var ec *etcdfedv1.EtcdCluster
	err := poll(ctx, orDefault(in.Timeout, time.Minute), fmt.Sprintf("EtcdCluster %s/%s names %s", in.Namespace, in.Name, in.Reason), func(ctx context.Context) (string, error) {
		ec = &etcdfedv1.EtcdCluster{}
		if err := in.Hub.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: in.Name}, ec); err != nil {
			return "", err
		}
		deg := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionDegraded)
		prog := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionProgressing)
		switch {
		case deg == nil || deg.Status != metav1.ConditionTrue || deg.Reason != in.Reason:
			return describeEtcdCluster(ec, "Degraded does not name "+in.Reason), nil
		case prog == nil || !strings.Contains(prog.Message, in.Reason):
			return describeEtcdCluster(ec, "Progressing does not name "+in.Reason), nil
		}
		return "", nil
	})
	return ec, err
}

// PeerRejectionSpecInput describes a ring whose members reject each other.
type PeerRejectionSpecInput struct {
	T         testing.TB
	Topology  *Topology
	Namespace string
	Name      string
	Domain    string
	Replicas  int
}

// PeerRejectionSpec creates an EtcdCluster with etcd's peer certificate
// address check on (peerSkipClientSANVerification false) on a topology
// whose pods share one source address, so every member rejects its peers
// and the ring cannot form. The cause (PeerCertificateNameMismatch, with
// the fix) must appear in the EtcdCluster's Degraded and Progressing
// conditions and in every member's PeerConnections condition; the time
// from creation to the cause in the EtcdCluster is logged. Then the fix
// the message names for a ring that never formed (created again with
// spec.tls.peerSkipClientSANVerification: true) forms the ring.
func PeerRejectionSpec(ctx context.Context, in PeerRejectionSpecInput) *ManagedEtcd {
	t := in.T
	t.Helper()
	if in.Topology.PeerSourceIsPodIP {
		t.Fatalf("PeerRejectionSpec needs pods that share one source address; this topology gives each its own")
	}
	hub := in.Topology.Hub
	if err := ensureNamespace(ctx, hub, in.Namespace); err != nil {
		t.Fatal(err)
	}
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: int32(in.Replicas),
			Version:  "3.6.16",
			DNS:      etcdfedv1.DNSSpec{Domain: in.Domain, TTLSeconds: ptrTo[int32](5)},
			TLS:      etcdfedv1.TLSSpec{PeerSkipClientSANVerification: false},
			// Its volumes go with it (the default, Retain, would keep
			// them, and a retained volume of the same name blocks the
			// members of the ring created again under the same name).
			Storage: etcdfedv1.StorageSpec{VolumeReclaimPolicy: etcdfedv1.VolumeDelete},
		},
	}
	start := time.Now()
	if err := hub.Client.Create(ctx, ec); err != nil {
		t.Fatalf("create EtcdCluster: %v", err)
	}
	got, err := WaitForPeerCause(ctx, WaitForPeerCauseInput{Hub: hub, Namespace: in.Namespace, Name: in.Name,
		Reason: etcdfedv1.ReasonPeerCertificateNameMismatch, Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	deg := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionDegraded)
	t.Logf("MEASURED: the cause (%s) in EtcdCluster %s's conditions %.1fs after its creation", deg.Reason, in.Name, took.Seconds())
	t.Logf("Degraded: %s", deg.Message)
	for _, want := range []string{"does not match any of DNSNames", "spec.tls.peerSkipClientSANVerification: true"} {
		if !strings.Contains(deg.Message, want) {
			t.Errorf("Degraded lacks %q: %s", want, deg.Message)
		}
	}
	// Every member's own condition says so.
	err = WaitForMembersCondition(ctx, WaitForMembersConditionInput{Topology: in.Topology, UID: got.UID, Members: in.Replicas,
		Type: etcdfedv1.ConditionPeerConnections, Status: metav1.ConditionFalse, Reason: etcdfedv1.ReasonPeerCertificateNameMismatch, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	// The fix the message names. This ring never formed: its bootstrap
	// stays in flight, and the hub rolls spec changes out only once no
	// membership change is (hub/etcdcluster reconcileObjects), so it is
	// deleted and created again with the address check off.
	DeleteEtcdClusterSpec(ctx, t, in.Topology, &ManagedEtcd{Namespace: in.Namespace, Name: in.Name, Domain: in.Domain})
	fixed := time.Now()
	m := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: in.Topology, Namespace: in.Namespace, Name: in.Name, Domain: in.Domain, Replicas: in.Replicas})
	t.Logf("the ring formed %.1fs after it was created again with spec.tls.peerSkipClientSANVerification: true", time.Since(fixed).Seconds())
	ready, err := m.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(ready.Status.Conditions, etcdfedv1.ConditionDegraded); c != nil && slices.Contains(etcdfedv1.PeerConnectionProblems, c.Reason) {
		t.Errorf("Degraded still names %s after the ring formed: %s", c.Reason, c.Message)
	}
	return m
}
