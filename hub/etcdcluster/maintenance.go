package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// Members' databases: their sizes in status.members, etcd's alarms in
// status.alarms and the NoSpaceAlarm and CorruptAlarm conditions, and the
// Defrag operation's two etcd calls (the planner decides it:
// hub/planner/defrag.go).

var (
	metricDBSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_member_db_size_bytes", Help: "Size of the member's database file, as etcd last reported it to the hub.",
	}, []string{"namespace", "name", "member"})
	metricDBSizeInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_member_db_size_in_use_bytes", Help: "Part of the member's database file that holds data (the rest is free pages defragmentation gives back).",
	}, []string{"namespace", "name", "member"})
	metricAlarms = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_cluster_alarms", Help: "Alarms etcd has raised, by type (NOSPACE, CORRUPT).",
	}, []string{"namespace", "name", "type"})
	metricDefrag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "etcdfed_defrag_duration_seconds", Help: "Time one member's defragmentation took, as the hub waited for it, by result.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 25},
	}, []string{"namespace", "name", "result"})
)

func init() {
	metrics.Registry.MustRegister(metricDBSize, metricDBSizeInUse, metricAlarms, metricDefrag)
}

// maintenancePolicy is spec.defragmentation with its defaults, whether a
// scheduled run is due, and when the last NOSPACE recovery ended without
// disarming the alarm raised now.
func maintenancePolicy(s *snapshot, st *etcdfedv1.EtcdClusterStatus) planner.Maintenance {
	ec := s.ec
	spec := ec.Spec.Defragmentation
	p := planner.Maintenance{
		AutoDefrag:           spec.Automatic == nil || *spec.Automatic,
		MinFragmentedPercent: int64(etcdfedv1.DefaultDefragMinFragmentedPercent),
		MinReclaimable:       100 << 20,
		// History is the user's data: compaction beyond the configured
		// retention needs their consent.
		NoSpaceCompactToCurrent: spec.NoSpaceCompaction == etcdfedv1.NoSpaceCompactionCurrentRevision,
	}
	if spec.MinFragmentedPercent != nil {
		p.MinFragmentedPercent = int64(*spec.MinFragmentedPercent)
	}
	if spec.MinReclaimable != nil {
		p.MinReclaimable = spec.MinReclaimable.Value()
	}
	if next, ok := nextScheduledDefrag(ec, st); ok {
		p.ScheduledDue = !s.now.Before(next)
	}
	for _, a := range st.Alarms {
		if a.Type == etcdfedv1.AlarmNoSpace && a.LastRecovery != nil && a.LastRecovery.After(p.NoSpaceLastRecovery) {
			p.NoSpaceLastRecovery = a.LastRecovery.Time
		}
	}
	return p
}

// recordDatabases records each member's database sizes and etcd's alarms
// (each with the hub-clock time it was first seen). What etcd did not
// answer keeps its last value.
func recordDatabases(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	for i := range st.Members {
		m := &st.Members[i]
		if em, ok := listed(s.etcd, m); ok && em.DBSize > 0 {
			m.DBSize, m.DBSizeInUse = em.DBSize, em.DBSizeInUse
		}
	}
	if !s.etcd.Reachable || !s.etcd.AlarmsKnown {
		return
	}
	var out []etcdfedv1.AlarmStatus
	for _, a := range s.etcd.Alarms {
		id := hexID(a.MemberID)
		as := etcdfedv1.AlarmStatus{Type: a.Type, Member: id, MemberID: id, Since: metav1.NewTime(s.now)}
		for _, m := range st.Members {
			if m.ID == id {
				as.Member = m.Name
			}
		}
		if i := slices.IndexFunc(st.Alarms, func(old etcdfedv1.AlarmStatus) bool { return old.Type == a.Type && old.MemberID == id }); i >= 0 {
			as.Since, as.LastRecovery = st.Alarms[i].Since, st.Alarms[i].LastRecovery
		}
		out = append(out, as)
	}
	slices.SortFunc(out, func(a, b etcdfedv1.AlarmStatus) int { return strings.Compare(a.Type+a.Member, b.Type+b.Member) })
	st.Alarms = out
}

// nextScheduledDefrag is when the next scheduled run is due: the schedule's
// next time after the last run (or after the EtcdCluster was created). ok
// is false without a schedule (or with one robfig/cron cannot read; the
// CRD refuses those).
func nextScheduledDefrag(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) (time.Time, bool) {
	if ec.Spec.Defragmentation.Schedule == "" {
		return time.Time{}, false
	}
	sched, err := cron.ParseStandard(ec.Spec.Defragmentation.Schedule)
	if err != nil {
		return time.Time{}, false
	}
	last := ec.CreationTimestamp.Time
	if d := st.Defragmentation; d != nil && d.LastScheduled != nil {
		last = d.LastScheduled.Time
	}
	return sched.Next(last.UTC()), true
}

// recordScheduledDefrag keeps status.defragmentation: a due run is done
// when the planner has nothing left to do (every member with free pages
// worth giving back defragmented), and when the next is due.
func recordScheduledDefrag(s *snapshot, st *etcdfedv1.EtcdClusterStatus, plan planner.Decision) {
	next, ok := nextScheduledDefrag(s.ec, st)
	if !ok {
		st.Defragmentation = nil
		return
	}
	if st.Defragmentation == nil {
		st.Defragmentation = &etcdfedv1.DefragmentationStatus{}
	}
	if !s.now.Before(next) && (plan.Action == planner.ActNone || plan.Action == planner.ActHoldCARotation) && st.Operation == nil {
		now := metav1.NewTime(s.now)
		st.Defragmentation.LastScheduled = &now
		next, _ = nextScheduledDefrag(s.ec, st)
	}
	n := metav1.NewTime(next)
	st.Defragmentation.NextScheduled = &n
}

// recordNoSpaceRecovery notes, when a NOSPACE recovery ends with the alarm
// still raised, when it ended: the next one is NoSpaceRetry later.
func recordNoSpaceRecovery(s *snapshot, st *etcdfedv1.EtcdClusterStatus, op *etcdfedv1.MembershipOperation) {
	if op == nil || op.Type != etcdfedv1.OperationDefrag || op.Reason != planner.ReasonNoSpace {
		return
	}
	now := metav1.NewTime(s.now)
	for i := range st.Alarms {
		if st.Alarms[i].Type == etcdfedv1.AlarmNoSpace {
			st.Alarms[i].LastRecovery = &now
		}
	}
}

// setAlarmConditions: NoSpaceAlarm and CorruptAlarm, naming the members
// and since when. While etcd does not answer they keep their last value.
func setAlarmConditions(s *snapshot, st *etcdfedv1.EtcdClusterStatus, gen int64) {
	if !s.etcd.Reachable || !s.etcd.AlarmsKnown {
		return
	}
	for _, c := range []struct{ cond, typ, effect string }{
		{etcdfedv1.ConditionNoSpaceAlarm, etcdfedv1.AlarmNoSpace, "etcd refuses writes (reads and deletes still work)"},
		{etcdfedv1.ConditionCorruptAlarm, etcdfedv1.AlarmCorrupt, "members' data disagree; etcd refuses writes until a human repairs the ring"},
	} {
		if msg := alarmMessage(st, c.typ); msg != "" {
			if c.typ == etcdfedv1.AlarmNoSpace && recoveryFailed(st) && s.ec.Spec.Defragmentation.NoSpaceCompaction != etcdfedv1.NoSpaceCompactionCurrentRevision {
				setCondition(st, gen, c.cond, true, etcdfedv1.ReasonCompactionNeedsConsent, msg+": "+c.effect+
					"; the ring is out of space: compaction within the configured retention (spec.etcd.autoCompactionMode/autoCompactionRetention) and defragmentation could not free enough."+
					" Set spec.defragmentation.noSpaceCompaction: CurrentRevision to let the hub compact to the current revision (every older revision is dropped), delete keys, or raise spec.etcd.quotaBackendBytes")
				continue
			}
			setCondition(st, gen, c.cond, true, etcdfedv1.ReasonAlarmRaised, msg+": "+c.effect)
			continue
		}
		setCondition(st, gen, c.cond, false, etcdfedv1.ReasonNoAlarm, "no "+c.typ+" alarm raised")
	}
}

// recoveryFailed: a NOSPACE recovery ended without disarming the alarm
// raised now.
func recoveryFailed(st *etcdfedv1.EtcdClusterStatus) bool {
	return slices.ContainsFunc(st.Alarms, func(a etcdfedv1.AlarmStatus) bool {
		return a.Type == etcdfedv1.AlarmNoSpace && a.LastRecovery != nil
	})
}

// alarmMessage is "NOSPACE on main-1 since 2026-...", "" when none.
func alarmMessage(st *etcdfedv1.EtcdClusterStatus, typ string) string {
	var on []string
	for _, a := range st.Alarms {
		if a.Type != typ {
			continue
		}
		s := fmt.Sprintf("%s since %s", a.Member, a.Since.UTC().Format(time.RFC3339))
		if a.LastRecovery != nil {
			s += fmt.Sprintf(" (compaction and defragmentation at %s could not free enough; next try at %s)",
				a.LastRecovery.UTC().Format(time.RFC3339), a.LastRecovery.Add(planner.NoSpaceRetry).UTC().Format(time.RFC3339))
		}
		on = append(on, s)
	}
	if len(on) == 0 {
		return ""
	}
	return typ + " on " + strings.Join(on, ", ")
}

// alarmProblems are the alarms, for Degraded.
func alarmProblems(st *etcdfedv1.EtcdClusterStatus) []string {
	var out []string
	for _, typ := range []string{etcdfedv1.AlarmNoSpace, etcdfedv1.AlarmCorrupt} {
		if msg := alarmMessage(st, typ); msg != "" {
			out = append(out, "alarm "+msg)
		}
	}
	return out
}

// alarmEvents are Warning events for alarms raised since the last pass and
// Normal ones for alarms gone.
func (r *Reconciler) alarmEvents(ec *etcdfedv1.EtcdCluster, before, after []etcdfedv1.AlarmStatus) {
	key := func(a etcdfedv1.AlarmStatus) string { return a.Type + "/" + a.MemberID }
	for _, a := range after {
		if !slices.ContainsFunc(before, func(b etcdfedv1.AlarmStatus) bool { return key(a) == key(b) }) {
			r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventAlarmRaised, "Observe", "etcd raised %s on %s", a.Type, a.Member)
		}
	}
	for _, b := range before {
		if !slices.ContainsFunc(after, func(a etcdfedv1.AlarmStatus) bool { return key(a) == key(b) }) {
			r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventAlarmCleared, "Observe", "%s on %s is no longer raised (raised since %s)", b.Type, b.Member, b.Since.UTC().Format(time.RFC3339))
		}
	}
}

// applyDefragment takes a Defrag operation's step on one member: its
// defragmentation, after a compaction in a NOSPACE recovery as far as
// noSpaceKeep allows.
func (r *Reconciler) applyDefragment(ctx context.Context, t *taking) error {
	ec, p, c := t.s.ec, t.d.plan, t.etcd
	if p.Operation != nil && p.Operation.Reason == planner.ReasonNoSpace {
		keep, ok, why := noSpaceKeep(ec)
		if ok {
			rev, compacted, err := c.CompactKeeping(ctx, keep)
			if err != nil {
				return err
			}
			if compacted {
				r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventCompacted, "Compact", "Compacted to revision %d to recover from NOSPACE (%s)", rev, why)
			}
		}
	}
	before := ""
	if m := statusMember(t.d.ledger, p.Member); m != nil {
		before = fmt.Sprintf("; its database file was %s, %s in use", planner.Bytes(m.DBSize), planner.Bytes(m.DBSizeInUse))
	}
	ctrl.LoggerFrom(ctx).Info("Defragmenting", "member", p.Member)
	took, err := c.Defragment(ctx, t.d.step.memberURLs)
	if err != nil {
		metricDefrag.WithLabelValues(ec.Namespace, ec.Name, "error").Observe(took.Seconds())
		return err
	}
	metricDefrag.WithLabelValues(ec.Namespace, ec.Name, "ok").Observe(took.Seconds())
	r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventMemberDefragmented, "Defragment", "Defragmented %s in %s%s", p.Member, took.Round(time.Millisecond), before)
	return nil
}

// noSpaceKeep is how many of the latest revisions a NOSPACE recovery's
// compaction keeps (ok false: it compacts nothing), and why. Without the
// user's consent (spec.defragmentation.noSpaceCompaction:
// CurrentRevision) it compacts no further than etcd's own auto-compaction
// would: the retention in revisions when autoCompactionMode is revision;
// nothing under a periodic retention (which revision a duration ago was
// is not known to the hub) or without auto-compaction.
func noSpaceKeep(ec *etcdfedv1.EtcdCluster) (keep int64, ok bool, why string) {
	if ec.Spec.Defragmentation.NoSpaceCompaction == etcdfedv1.NoSpaceCompactionCurrentRevision {
		return 0, true, "to the current revision, as spec.defragmentation.noSpaceCompaction allows"
	}
	e := ec.Spec.Etcd
	if e.AutoCompactionMode != etcdfedv1.AutoCompactionRevision {
		return 0, false, "no compaction beyond the configured retention"
	}
	n, err := strconv.ParseInt(e.AutoCompactionRetention, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, "no compaction beyond the configured retention"
	}
	return n, true, fmt.Sprintf("keeping the last %d revisions, spec.etcd.autoCompactionRetention", n)
}

// applyDisarm disarms NOSPACE once the members are compacted and
// defragmented.
func (r *Reconciler) applyDisarm(ctx context.Context, t *taking) error {
	if err := t.etcd.DisarmNoSpace(ctx); err != nil {
		return err
	}
	r.event(t.s.ec, corev1.EventTypeNormal, etcdfedv1.EventAlarmDisarmed, "DisarmAlarm", "Disarmed NOSPACE after compaction (as far as spec.defragmentation.noSpaceCompaction allows) and defragmentation")
	return nil
}

// recordMaintenanceMetrics exports the members' sizes and the alarms.
func recordMaintenanceMetrics(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) {
	metricDBSize.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	metricDBSizeInUse.DeletePartialMatch(prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name})
	for _, m := range st.Members {
		if m.DBSize > 0 {
			metricDBSize.WithLabelValues(ec.Namespace, ec.Name, m.Name).Set(float64(m.DBSize))
			metricDBSizeInUse.WithLabelValues(ec.Namespace, ec.Name, m.Name).Set(float64(m.DBSizeInUse))
		}
	}
	for _, typ := range []string{etcdfedv1.AlarmNoSpace, etcdfedv1.AlarmCorrupt} {
		n := 0
		for _, a := range st.Alarms {
			if a.Type == typ {
				n++
			}
		}
		metricAlarms.WithLabelValues(ec.Namespace, ec.Name, typ).Set(float64(n))
	}
}

func forgetMaintenanceMetrics(ec *etcdfedv1.EtcdCluster) {
	l := prometheus.Labels{"namespace": ec.Namespace, "name": ec.Name}
	metricDBSize.DeletePartialMatch(l)
	metricDBSizeInUse.DeletePartialMatch(l)
	metricAlarms.DeletePartialMatch(l)
	metricDefrag.DeletePartialMatch(l)
}

// listedID is etcd's member list entry of id.
func listedID(e planner.Etcd, id uint64) (planner.ListEntry, bool) {
	for _, em := range e.Members {
		if id != 0 && em.ID == id {
			return em, true
		}
	}
	return planner.ListEntry{}, false
}

// maintenance is the feature of spec.defragmentation and etcd's alarms:
// the planner's Maintenance policy, status.defragmentation recorded (the
// databases and alarms are recorded with the members:
// recordObservations), and the alarm conditions (setAlarmConditions).
type maintenance struct{ s *snapshot }

func (f *maintenance) observe(*etcdfedv1.EtcdClusterStatus, *decision) {}

func (f *maintenance) input(in *planner.Input, st *etcdfedv1.EtcdClusterStatus) {
	in.Maintenance = maintenancePolicy(f.s, st)
}

func (f *maintenance) record(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	recordScheduledDefrag(f.s, st, d.plan)
}

func (f *maintenance) status(*etcdfedv1.EtcdClusterStatus, *decision, applyResult) {}
