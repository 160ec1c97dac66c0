// Package clusterstatus renders an EtcdCluster's status for humans: the
// member table and the conditions `etcdfed status` prints.
package clusterstatus

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Render writes the EtcdCluster's summary, members, conditions, operation
// and endpoints.
func Render(w io.Writer, ec *etcdfedv1.EtcdCluster, now time.Time) error {
	st := ec.Status
	p := &printer{w: w}
	p.f("EtcdCluster %s/%s: %d replicas, etcd %s, domain %s\n", ec.Namespace, ec.Name, ec.Spec.Replicas, ec.Spec.Version, ec.Spec.DNS.Domain)
	if st.ClusterID != "" {
		p.f("etcd cluster ID %s, members %s ready, zones %s, leader %s\n", st.ClusterID, orDash(st.MemberSummary), orDash(st.ZoneSummary), orDash(st.Leader))
	} else {
		p.f("not bootstrapped yet\n")
	}
	p.f("\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tCLUSTER\tZONE\tROLE\tREADY\tADDRESS\tETCD ID\tINCARNATION\tSINCE\tOBJECT")
	for _, m := range st.Members {
		since := "-"
		if m.Since != nil {
			since = age(now, m.Since.Time)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%s\t%d\t%s\t%s\n", m.Name, orDash(m.Cluster), orDash(m.Zone), orDash(string(m.Role)), m.Ready, orDash(m.Address), orDash(m.ID), m.Incarnation, since, orDash(m.Object))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	p.f("\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(now, c.LastTransitionTime.Time), oneLine(c.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if op := st.Operation; op != nil {
		p.f("\nIn progress: %s %s (%s), step %s, for %s: %s\n", op.Type, op.Member, op.Reason, op.Step, age(now, op.StartedAt.Time), oneLine(op.Message))
	}
	renderMoves(p, ec)
	renderAdoption(p, ec, now)
	renderCARotation(p, ec, now)
	renderBackup(p, ec, now)
	renderDistance(p, ec, now)
	if len(st.Endpoints) > 0 {
		p.f("\nEndpoints: %s\n", strings.Join(st.Endpoints, ","))
	}
	return p.err
}

// renderMoves prints the failure tolerance etcd's member list gives now and,
// while members are to move (a migration), how many and whether moves are
// paused.
func renderMoves(p *printer, ec *etcdfedv1.EtcdCluster) {
	st := ec.Status
	if st.FailuresTolerated != nil {
		p.f("\nFailure tolerance: %d voting member(s) can fail and etcd keeps its quorum\n", *st.FailuresTolerated)
	}
	switch {
	case st.PendingMoves > 0 && ec.Spec.Topology.PauseMoves:
		p.f("Moves: %d member(s) still to move, paused (spec.topology.pauseMoves); the one in flight finishes\n", st.PendingMoves)
	case st.PendingMoves > 0:
		p.f("Moves: %d member(s) still to move, one at a time, make before break\n", st.PendingMoves)
	case ec.Spec.Topology.PauseMoves:
		p.f("Moves: none planned; paused (spec.topology.pauseMoves)\n")
	}
}

// renderCARotation prints a CA rotation under way (its phase, progress,
// and a hold with the command that answers it); a finished one is not
// printed.
func renderCARotation(p *printer, ec *etcdfedv1.EtcdCluster, now time.Time) {
	cr := ec.Status.CARotation
	if cr == nil || cr.Phase == etcdfedv1.CARotationCompleted || cr.Phase == "" {
		return
	}
	p.f("\nCA rotation: %s, %d of %d members", cr.Phase, cr.MembersDone, cr.MembersTotal)
	if cr.PhaseStartedAt != nil {
		p.f(", phase for %s", age(now, cr.PhaseStartedAt.Time))
	}
	p.f("\n")
	if cr.HeldSince != nil && cr.ContinuedAt == nil {
		p.f("  held for %s: restart the consumers that read their CA only at start, then: etcdfed rotate-ca %s -n %s --continue\n",
			age(now, cr.HeldSince.Time), ec.Name, ec.Namespace)
	}
	if cr.Message != "" {
		p.f("  %s\n", oneLine(cr.Message))
	}
}

// renderBackup prints the backup schedule, the newest snapshot and the
// newest failure, when spec.backup is set or a history exists.
func renderBackup(p *printer, ec *etcdfedv1.EtcdCluster, now time.Time) {
	b, st := ec.Spec.Backup, ec.Status.Backup
	if b == nil && st == nil {
		return
	}
	p.f("\n")
	if b != nil {
		sched := b.Schedule
		if b.Suspend {
			sched += " (suspended)"
		}
		p.f("Backups: %s to %s", sched, b.Store.URL)
		if st != nil && st.NextScheduleTime != nil {
			p.f(", next %s", st.NextScheduleTime.UTC().Format(time.RFC3339))
		}
		p.f("\n")
	}
	if st == nil {
		return
	}
	if s := st.LastSuccess; s != nil {
		p.f("  last snapshot: %s ago, revision %d, %d bytes, from %s: %s (%d retained)\n", age(now, s.Time.Time), s.Revision, s.SizeBytes, orDash(s.Member), s.Location, st.Retained)
	}
	if f := st.LastFailure; f != nil {
		p.f("  last failure: %s ago, %s: %s\n", age(now, f.Time.Time), f.Reason, oneLine(f.Message))
	}
	if ip := st.InProgress; ip != nil {
		p.f("  in progress: %s backup for %s\n", ip.Trigger, age(now, ip.StartedAt.Time))
	}
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
