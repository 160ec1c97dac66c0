package etcdcluster

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// Progressing during a version change: Upgrading with the count of members
// on the new version; RolloutHalted (False) naming the member when halted;
// plain Roll for a change of anything but the version.
func TestVersionProgress(t *testing.T) {
	etcd := planner.Etcd{Reachable: true, ClusterVersion: "3.5.0", Members: []planner.ListEntry{
		{ID: 1, Name: "main-0", Version: "3.5.35"}, {ID: 2, Name: "main-1", Version: "3.6.16"}, {ID: 3, Name: "main-2", Version: "3.5.35"},
	}}
	for _, tc := range []struct {
		name         string
		version      string
		plan         planner.Decision
		res          applyResult
		status       metav1.ConditionStatus
		reason, want string
	}{
		{"upgrade", "3.6.16", planner.Decision{Action: planner.ActWait}, applyResult{}, metav1.ConditionTrue, etcdfedv1.ReasonUpgrading, "(1 of 3 members run 3.6.16; cluster version 3.5.0)"},
		{"downgrade", "3.5.35", planner.Decision{Action: planner.ActWait}, applyResult{}, metav1.ConditionTrue, etcdfedv1.ReasonDowngrading, "(2 of 3 members run 3.5.35"},
		// etcd's refusal, as etcdops.EnableDowngrade wraps it, is quoted
		// with what to do.
		{"downgrade refused by etcd", "3.5.35", planner.Decision{Action: planner.ActEnableDowngrade},
			applyResult{stepErr: fmt.Errorf("%w: downgrade validate 3.5: etcdserver: cluster has a downgrade job in progress", etcdops.ErrDowngradeRefused)},
			metav1.ConditionFalse, etcdfedv1.ReasonDowngradeRefused, "no member is restarted: etcdops: etcd refused the downgrade: downgrade validate 3.5: etcdserver: cluster has a downgrade job in progress; set spec.version back"},
		{"halted", "3.6.16", planner.Decision{Action: planner.ActWait, Halted: true, Reason: "rollout halted: main-1 does not come up"}, applyResult{}, metav1.ConditionFalse, etcdfedv1.ReasonRolloutHalted, "rollout halted: main-1"},
		{"not a version change", "", planner.Decision{Action: planner.ActWait}, applyResult{}, metav1.ConditionTrue, "Roll", "Roll main-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := etcd
			if tc.version == "" {
				e.Members = []planner.ListEntry{{ID: 1, Version: "3.6.16"}}
				tc.version = "3.6.16"
			}
			s := &snapshot{ec: &etcdfedv1.EtcdCluster{Spec: etcdfedv1.EtcdClusterSpec{Version: tc.version}}, etcd: e}
			st := &etcdfedv1.EtcdClusterStatus{Operation: &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRoll, Member: "main-1", Reason: "SpecChanged"}}
			setProgressing(s, st, 1, &decision{plan: tc.plan}, tc.res, nil)
			c := meta.FindStatusCondition(st.Conditions, etcdfedv1.ConditionProgressing)
			if c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.want) {
				t.Errorf("Progressing=%s %s %q; want %s %s containing %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.want)
			}
		})
	}
}

// A member object's PodReady=False ContainerFailing is the planner's
// Failing, but only for the generation the spoke acted on.
func TestPodFailing(t *testing.T) {
	obj := &etcdfedv1.EtcdMember{}
	obj.Generation = 2
	obj.Status.ObservedGeneration = 2
	obj.Status.Conditions = []metav1.Condition{{Type: etcdfedv1.ConditionPodReady, Status: metav1.ConditionFalse, Reason: etcdfedv1.ReasonContainerFailing, Message: "container etcd: CreateContainerError"}}
	if got := podFailing(obj); got != "container etcd: CreateContainerError" {
		t.Errorf("podFailing = %q", got)
	}
	obj.Generation = 3 // a newer spec the spoke has not acted on
	if got := podFailing(obj); got != "" {
		t.Errorf("podFailing of an older generation = %q, want none", got)
	}
}
