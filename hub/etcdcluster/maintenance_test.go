package etcdcluster

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// sizes gives every member of ring() its database sizes in MiB and the
// default quota; etcd's alarms are read.
func sizes(s *snapshot, file, inUse int64) {
	for i := range s.etcd.Members {
		s.etcd.Members[i].DBSize, s.etcd.Members[i].DBSizeInUse, s.etcd.Members[i].DBSizeQuota = file<<20, inUse<<20, 2<<30
	}
	s.etcd.AlarmsKnown = true
}

// One pass over a ring whose members' files are fragmented, or that has
// an alarm raised: the Defrag the planner chose rendered with the member's
// client URL, the sizes in status.members, alarms in status.alarms and in
// their conditions (member and since when), the thresholds from the spec.
func TestDecideMaintenance(t *testing.T) {
	t.Run("fragmented members: a Defrag of a follower recorded, sizes shown", func(t *testing.T) {
		s := ring()
		sizes(s, 400, 20)
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		if d.plan.Action != planner.ActBegin || st.Operation == nil || st.Operation.Type != etcdfedv1.OperationDefrag || st.Operation.Member != "main-1" ||
			st.Operation.Reason != planner.ReasonFragmented || st.Operation.Step != string(planner.ActDefragment) {
			t.Fatalf("plan %s (%s), operation %+v; want a Defrag of main-1 begun", d.plan.Action, d.plan.Reason, st.Operation)
		}
		for _, m := range st.Members {
			if m.DBSize != 400<<20 || m.DBSizeInUse != 20<<20 {
				t.Errorf("%s: dbSize %d, dbSizeInUse %d", m.Name, m.DBSize, m.DBSizeInUse)
			}
		}
		if c := condition(st, etcdfedv1.ConditionProgressing); c.Status != metav1.ConditionTrue || c.Reason != string(etcdfedv1.OperationDefrag) || !strings.Contains(c.Message, "main-1 (Fragmented)") {
			t.Errorf("Progressing %s %s: %s", c.Status, c.Reason, c.Message)
		}
	})
	t.Run("a Defrag at its step: rendered with the member's client URL", func(t *testing.T) {
		s := ring()
		sizes(s, 400, 20)
		inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationDefrag, Member: "main-1", Reason: planner.ReasonFragmented, Step: string(planner.ActDefragment)})
		d := decide(s)
		if d.plan.Action != planner.ActDefragment || d.step.err != nil || len(d.step.memberURLs) != 1 || d.step.memberURLs[0] != s.etcd.Members[1].ClientURLs[0] {
			t.Fatalf("plan %s (%s), urls %v, err %v", d.plan.Action, d.plan.Reason, d.step.memberURLs, d.step.err)
		}
	})
	t.Run("thresholds from the spec: 50% and 500Mi leave a 400 MiB file alone", func(t *testing.T) {
		s := ring()
		sizes(s, 400, 20)
		q := resource.MustParse("500Mi")
		s.ec.Spec.Defragmentation = etcdfedv1.DefragmentationSpec{MinFragmentedPercent: ptr.To[int32](50), MinReclaimable: &q}
		if d := decide(s); d.plan.Action != planner.ActNone {
			t.Errorf("plan %s (%s), want None", d.plan.Action, d.plan.Reason)
		}
		s.ec.Spec.Defragmentation = etcdfedv1.DefragmentationSpec{Automatic: ptr.To(false)}
		if d := decide(s); d.plan.Action != planner.ActNone {
			t.Errorf("automatic false: plan %s (%s), want None", d.plan.Action, d.plan.Reason)
		}
	})
	t.Run("NOSPACE raised: recorded with its member and since when, conditions, Degraded, the recovery begins", func(t *testing.T) {
		s := ring()
		sizes(s, 2048, 2000)
		s.etcd.Alarms = []planner.Alarm{{MemberID: 2, Type: planner.AlarmNoSpace}}
		earlier := metav1.NewTime(now.Add(-time.Minute))
		s.ec.Status.Alarms = []etcdfedv1.AlarmStatus{{Type: etcdfedv1.AlarmNoSpace, Member: "main-1", MemberID: "2", Since: earlier}}
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		if len(st.Alarms) != 1 || st.Alarms[0].Member != "main-1" || !st.Alarms[0].Since.Equal(&earlier) {
			t.Errorf("alarms %+v; want NOSPACE on main-1 since a minute ago", st.Alarms)
		}
		c := condition(st, etcdfedv1.ConditionNoSpaceAlarm)
		if c.Status != metav1.ConditionTrue || c.Reason != etcdfedv1.ReasonAlarmRaised || !strings.Contains(c.Message, "NOSPACE on main-1 since "+earlier.UTC().Format(time.RFC3339)) {
			t.Errorf("NoSpaceAlarm %s %s: %s", c.Status, c.Reason, c.Message)
		}
		if c := condition(st, etcdfedv1.ConditionCorruptAlarm); c.Status != metav1.ConditionFalse {
			t.Errorf("CorruptAlarm %s %s: %s", c.Status, c.Reason, c.Message)
		}
		if c := condition(st, etcdfedv1.ConditionDegraded); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "alarm NOSPACE on main-1") {
			t.Errorf("Degraded %s %s: %s", c.Status, c.Reason, c.Message)
		}
		if op := st.Operation; op == nil || op.Type != etcdfedv1.OperationDefrag || op.Reason != planner.ReasonNoSpace || op.Step != string(planner.ActCompact) {
			t.Errorf("operation %+v; want a NoSpace recovery begun", op)
		}
	})
	t.Run("a NOSPACE recovery that could not disarm: the time noted, shown, not begun again", func(t *testing.T) {
		s := ring()
		sizes(s, 2048, 2040)
		s.etcd.Alarms = []planner.Alarm{{MemberID: 2, Type: planner.AlarmNoSpace}}
		s.ec.Status.Alarms = []etcdfedv1.AlarmStatus{{Type: etcdfedv1.AlarmNoSpace, Member: "main-1", MemberID: "2", Since: metav1.NewTime(now.Add(-time.Hour))}}
		inFlight(s, etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationDefrag, Member: "main-2", Reason: planner.ReasonNoSpace, Step: string(planner.ActDefragment)})
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		if d.plan.Action != planner.ActFinish || st.Operation != nil || st.Alarms[0].LastRecovery == nil || !st.Alarms[0].LastRecovery.Time.Equal(now) {
			t.Fatalf("plan %s (%s), operation %+v, alarms %+v", d.plan.Action, d.plan.Reason, st.Operation, st.Alarms)
		}
		if c := condition(st, etcdfedv1.ConditionNoSpaceAlarm); !strings.Contains(c.Message, "could not free enough; next try at "+now.Add(planner.NoSpaceRetry).Format(time.RFC3339)) ||
			c.Reason != etcdfedv1.ReasonCompactionNeedsConsent || !strings.Contains(c.Message, "the ring is out of space") || !strings.Contains(c.Message, "Set spec.defragmentation.noSpaceCompaction: CurrentRevision") {
			t.Errorf("NoSpaceAlarm %s: %s; want the consent to compact asked for", c.Reason, c.Message)
		}
		consented := ring()
		consented.ec.Spec.Defragmentation.NoSpaceCompaction = etcdfedv1.NoSpaceCompactionCurrentRevision
		consented.etcd, consented.ec.Status = s.etcd, *st.DeepCopy()
		if c := condition(computeStatus(consented, decide(consented), applyResult{}, ""), etcdfedv1.ConditionNoSpaceAlarm); c.Reason != etcdfedv1.ReasonAlarmRaised || strings.Contains(c.Message, "noSpaceCompaction") {
			t.Errorf("with consent given, NoSpaceAlarm %s: %s; want AlarmRaised without asking for it", c.Reason, c.Message)
		}
		s.ec.Status = st
		s.ec.Status.Operation = nil
		if d := decide(s); d.plan.Action != planner.ActNone {
			t.Errorf("the pass after: plan %s (%s), want None until the retry", d.plan.Action, d.plan.Reason)
		}
	})
	t.Run("alarms not read: status and conditions keep their last value", func(t *testing.T) {
		s := ring()
		since := metav1.NewTime(now.Add(-time.Hour))
		s.ec.Status.Alarms = []etcdfedv1.AlarmStatus{{Type: etcdfedv1.AlarmCorrupt, Member: "main-2", MemberID: "3", Since: since}}
		s.ec.Status.Conditions = []metav1.Condition{{Type: etcdfedv1.ConditionCorruptAlarm, Status: metav1.ConditionTrue, Reason: etcdfedv1.ReasonAlarmRaised, Message: "CORRUPT on main-2"}}
		st := computeStatus(s, decide(s), applyResult{}, "")
		if len(st.Alarms) != 1 || condition(st, etcdfedv1.ConditionCorruptAlarm).Status != metav1.ConditionTrue {
			t.Errorf("alarms %+v, CorruptAlarm %+v", st.Alarms, condition(st, etcdfedv1.ConditionCorruptAlarm))
		}
	})
	t.Run("the alarm gone: cleared", func(t *testing.T) {
		s := ring()
		sizes(s, 20, 19)
		s.ec.Status.Alarms = []etcdfedv1.AlarmStatus{{Type: etcdfedv1.AlarmNoSpace, Member: "main-1", MemberID: "2", Since: metav1.NewTime(now.Add(-time.Hour))}}
		st := computeStatus(s, decide(s), applyResult{}, "")
		if len(st.Alarms) != 0 || condition(st, etcdfedv1.ConditionNoSpaceAlarm).Status != metav1.ConditionFalse {
			t.Errorf("alarms %+v, NoSpaceAlarm %+v", st.Alarms, condition(st, etcdfedv1.ConditionNoSpaceAlarm))
		}
	})
	t.Run("a schedule: a due run defragments members with free pages, then is recorded done with the next due time", func(t *testing.T) {
		s := ring()
		s.ec.CreationTimestamp = metav1.NewTime(now.Add(-8 * 24 * time.Hour))
		s.ec.Spec.Defragmentation.Schedule = "0 3 * * sun"
		sizes(s, 60, 40)
		d := decide(s)
		st := computeStatus(s, d, applyResult{}, "")
		if st.Operation == nil || st.Operation.Reason != planner.ReasonScheduled || st.Operation.Member != "main-1" {
			t.Fatalf("plan %s (%s), operation %+v; want a Scheduled Defrag of main-1", d.plan.Action, d.plan.Reason, st.Operation)
		}
		if st.Defragmentation == nil || st.Defragmentation.LastScheduled != nil || st.Defragmentation.NextScheduled == nil || !st.Defragmentation.NextScheduled.Time.Before(now) {
			t.Errorf("defragmentation status %+v; want the overdue run as next, none done", st.Defragmentation)
		}
		s = ring()
		s.ec.CreationTimestamp = metav1.NewTime(now.Add(-8 * 24 * time.Hour))
		s.ec.Spec.Defragmentation.Schedule = "0 3 * * sun"
		sizes(s, 20, 20)
		st = computeStatus(s, decide(s), applyResult{}, "")
		// now is a Sunday noon: the next run is the next Sunday 03:00.
		if d := st.Defragmentation; d == nil || d.LastScheduled == nil || !d.LastScheduled.Time.Equal(now) || d.NextScheduled == nil || !d.NextScheduled.Time.Equal(time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)) {
			t.Errorf("defragmentation status %+v; want the run done now, the next on 2026-11-29 03:00", st.Defragmentation)
		}
		s.ec.Status = st
		if d := decide(s); d.plan.Action != planner.ActNone {
			t.Errorf("after the run: plan %s (%s)", d.plan.Action, d.plan.Reason)
		}
	})
}
