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

// rollTimes is, per member, the time from the first sample that saw its
// object on the new spec to the first later one that saw its pod ready on
// it, in rollout order.
func rollTimes(samples []rollSample) string {
	began, done := map[string]time.Time{}, map[string]time.Time{}
	var order []string
	for _, s := range samples {
		for _, m := range s.onNew {
			if _, ok := began[m]; !ok {
				began[m] = s.at
				order = append(order, m)
			}
			if _, ok := done[m]; !ok && !slices.Contains(s.unsettled, m) {
				done[m] = s.at
			}
		}
	}
	var parts []string
	for _, m := range order {
		if d, ok := done[m]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1fs", m, d.Sub(began[m]).Seconds()))
		} else {
			parts = append(parts, m+" (not seen ready)")
		}
	}
	return strings.Join(parts, ", ")
}

// VersionImage is the default image of an etcd release, as the hub
// renders it (the local node runs bin/etcd-<release> for it).
func VersionImage(version string) string { return etcdfedv1.DefaultImageRepository + ":v" + version }

// UpgradeSpecInput changes spec.version from the ring's running version.
type UpgradeSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// To is the new spec.version.
	To      string
	Timeout time.Duration
}

// UpgradeSpec changes spec.version under a recorded workload and requires
// what RollSpecSpec requires of any rollout (one member at a time, the
// leader last after a leader move, same IDs and volumes, Progressing
// naming each member, here with reason Upgrading or Downgrading, a
// linearizable history with no acknowledged write lost), and then every
// member reporting the new version in status.members[].version and the
// cluster version of its minor in status.clusterVersion.
func UpgradeSpec(ctx context.Context, in UpgradeSpecInput) {
	t := in.T
	t.Helper()
	RollSpecSpec(ctx, RollSpecInput{T: t, Topology: in.Topology, Etcd: in.Etcd, Image: VersionImage(in.To), Timeout: in.Timeout,
		Change: func(s *etcdfedv1.EtcdClusterSpec) { s.Version = in.To }})
	minor := in.To[:strings.LastIndex(in.To, ".")]
	err := poll(ctx, time.Minute, "every member reports "+in.To+" and the cluster version "+minor, func(ctx context.Context) (string, error) {
		ec, err := in.Etcd.Get(ctx, in.Topology.Hub)
		if err != nil {
			return "", err
		}
		var off []string
		for _, m := range ec.Status.Members {
			if m.Version != in.To {
				off = append(off, m.Name+"="+m.Version)
			}
		}
		if len(off) > 0 || !strings.HasPrefix(ec.Status.ClusterVersion, minor+".") {
			return fmt.Sprintf("members on another version: %v; cluster version %q", off, ec.Status.ClusterVersion), nil
		}
		t.Logf("every member runs %s; cluster version %s", in.To, ec.Status.ClusterVersion)
		return "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// HaltedUpgradeSpecInput sets a version no member can start on.
type HaltedUpgradeSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *ManagedEtcd
	// Broken is a spec.version the CRD accepts but no node can run (no
	// bin/etcd-<Broken>); Good is the version the ring runs.
	Broken, Good string
	// Hold is how long the halt is watched before the spec is set back.
	Hold time.Duration
}

// HaltedUpgradeSpec sets spec.version to a release whose image cannot run,
// under a recorded workload. The first member rolled must fail to start,
// and the hub must stop there: Progressing=False with reason RolloutHalted
// naming the member and its container's error, Degraded=True saying the
// same, no other member's object changed through Hold, the member neither
// replaced nor removed. Setting spec.version back brings the member back on
// its volume and every member ready; the history stays linearizable with
// no acknowledged write lost.
func HaltedUpgradeSpec(ctx context.Context, in HaltedUpgradeSpecInput) {
	t := in.T
	t.Helper()
	hub := in.Topology.Hub
	ec, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	idsBefore, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "halt/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)

	setVersion := func(v string) {
		t.Helper()
		ec, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			t.Fatal(err)
		}
		before := ec.DeepCopy()
		ec.Spec.Version = v
		if err := hub.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	setVersion(in.Broken)
	var halted string
	err = poll(ctx, 5*time.Minute, "Progressing=False RolloutHalted", func(ctx context.Context) (string, error) {
		got, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionProgressing)
		if c == nil || c.Reason != etcdfedv1.ReasonRolloutHalted || got.Status.Operation == nil {
			return fmt.Sprintf("Progressing %+v", c), nil
		}
		halted = got.Status.Operation.Member
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, halted) || !strings.Contains(c.Message, "CreateContainerError") || !strings.Contains(c.Message, in.Broken) {
			return "", fmt.Errorf("condition Progressing=%s %s: %q; want False, naming %s, its CreateContainerError and version %s", c.Status, c.Reason, c.Message, halted, in.Broken)
		}
		d := meta.FindStatusCondition(got.Status.Conditions, etcdfedv1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, "rollout halted: "+halted) {
			return fmt.Sprintf("Degraded %+v", d), nil
		}
		t.Logf("halted %.1fs after the change: Progressing=False %s: %s", time.Since(start).Seconds(), c.Reason, c.Message)
		return "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Through Hold, only the halted member is on the broken version, and
	// the others stay ready voters.
	image := VersionImage(in.Broken)
	deadline := time.Now().Add(in.Hold)
	for time.Now().Before(deadline) {
		s, err := sampleRoll(ctx, RollSpecInput{Topology: in.Topology, Etcd: in.Etcd, Image: image}, ec.UID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.onNew, []string{halted}) {
			t.Fatalf("members on %s: %v; want only the halted %s", in.Broken, s.onNew, halted)
		}
		if !slices.Equal(s.unsettled, []string{halted}) {
			t.Fatalf("members not ready on their spec: %v; want only the halted %s", s.unsettled, halted)
		}
		sleepCtx(ctx, time.Second)
	}
	got, err := in.Etcd.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.LastIncarnation != ec.Status.LastIncarnation {
		t.Errorf("the halted member was replaced (last incarnation %d -> %d)", ec.Status.LastIncarnation, got.Status.LastIncarnation)
	}
	if err := waitForEventReason(ctx, hub, in.Etcd, "MemberRoll", start); err != nil {
		t.Error(err)
	}

	setVersion(in.Good)
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: in.Etcd.Namespace, Name: in.Etcd.Name, Replicas: len(ec.Status.Members), Timeout: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, 5*time.Minute, "the rollout back to "+in.Good+" done", func(ctx context.Context) (string, error) {
		s, err := sampleRoll(ctx, RollSpecInput{Topology: in.Topology, Etcd: in.Etcd, Image: VersionImage(in.Good)}, ec.UID, nil)
		if err != nil {
			return "", err
		}
		got, err := in.Etcd.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		if len(s.onNew) != len(got.Status.Members) || len(s.unsettled) > 0 || got.Status.Operation != nil {
			return fmt.Sprintf("on %s: %v; unsettled %v; operation %+v", in.Good, s.onNew, s.unsettled, got.Status.Operation), nil
		}
		return "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	idsAfter, err := memberIDs(ctx, in.Etcd.Client)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(idsAfter) != fmt.Sprint(idsBefore) {
		t.Errorf("member list changed: before %v, after %v", idsBefore, idsAfter)
	}
	t.Logf("longest gap between acknowledged writes %s", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}

// waitForEventReason waits for an event with reason on the EtcdCluster
// since start.
func waitForEventReason(ctx context.Context, hub *Cluster, m *ManagedEtcd, reason string, start time.Time) error {
	return poll(ctx, 30*time.Second, "a "+reason+" event", func(ctx context.Context) (string, error) {
		evs, err := hub.Clientset.EventsV1().Events(m.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Regarding.Name == m.Name && !e.EventTime.Time.Before(start.Add(-time.Second)) {
				return "", nil
			}
		}
		return "none yet", nil
	})
}
