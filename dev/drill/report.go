package drill

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/etcdfed/etcdfed/dev/workload"
	"github.com/etcdfed/etcdfed/internal/text"
)

// ReportKind and ReportVersion identify the JSON document `etcdfed drill
// --json` prints. Fields are added within a version, never renamed or
// removed; docs/failures.md, "Drills", documents them.
const (
	ReportKind    = "DrillReport"
	ReportVersion = 1
)

// Report is the outcome of a drill. Times are seconds after the failure
// began; null when it did not happen while the drill watched.
type Report struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// Cluster is the EtcdCluster, namespace/name.
	Cluster string `json:"cluster"`
	Zone    string `json:"zone"`
	Mode    Mode   `json:"mode"`
	// Duration is how long the failure was held, in seconds: from the
	// failure to the restore. (It used to be the --duration asked for, so
	// a drill held until the members moved reported 0.)
	Duration float64 `json:"durationSeconds"`
	// RequestedDuration is the --duration asked for in seconds; 0: the
	// failure was held until the hub had moved the zone's members.
	RequestedDuration float64 `json:"requestedDurationSeconds"`
	// DrillSeconds is how long the whole drill took, from its start (the
	// workload's first writes) to the report.
	DrillSeconds float64   `json:"drillSeconds"`
	StartedAt    time.Time `json:"startedAt"`
	// ZoneMembers and ZoneClusters were in the zone when the drill began.
	ZoneMembers  []string `json:"zoneMembers"`
	ZoneClusters []string `json:"zoneClusters"`
	Replicas     int      `json:"replicas"`
	// WasTolerant: FailureTolerant was True when the drill began.
	WasTolerant  bool         `json:"wasFailureTolerant"`
	Times        Times        `json:"times"`
	Availability Availability `json:"availability"`
	Moves        []MoveReport `json:"moves"`
	Workload     WorkloadInfo `json:"workload"`
	Verdicts     Verdicts     `json:"verdicts"`
	// Pass is true when every verdict passed.
	Pass bool `json:"pass"`
	// Failures explain each failed verdict.
	Failures []string `json:"failures"`
	// Notes are things worth knowing that did not fail the drill.
	Notes []string `json:"notes"`
	// Migration is a migration drill's own part (mode migrate; times are
	// then seconds after the spec change, Zone is empty, ZoneMembers
	// and ZoneClusters are the ring's members and clusters before it).
	Migration *MigrationReport `json:"migration,omitempty"`
}

// Times are seconds after the failure began.
type Times struct {
	// Injected is how long failing the zone took (the kill, the
	// partition, the spec patch).
	Injected float64 `json:"injectedSeconds"`
	// Detected: the first Degraded naming the zone or its member cluster;
	// DetectedBy is its message.
	Detected   *float64 `json:"detectedSeconds"`
	DetectedBy string   `json:"detectedBy"`
	// MemberDegraded: the first Degraded naming a member of the zone.
	MemberDegraded *float64 `json:"memberDegradedSeconds"`
	// FirstMove: the hub began moving a member of the zone.
	FirstMove   *float64 `json:"firstMoveSeconds"`
	FirstMoveBy string   `json:"firstMoveBy"`
	// Evacuated: every member a ready voter outside the zone, nothing in
	// flight (full redundancy without the zone).
	Evacuated *float64 `json:"evacuatedSeconds"`
	// Restored: the drill began restoring the zone.
	Restored *float64 `json:"restoredSeconds"`
	// Healed: after the restore, Available with every member a ready
	// voter, nothing in flight, failure tolerant again if it was, and no
	// Degraded naming the zone, its clusters or its members.
	Healed *float64 `json:"healedSeconds"`
}

// Availability is how long the ring was not Available after the failure.
type Availability struct {
	Unavailable        float64 `json:"unavailableSeconds"`
	LongestUnavailable float64 `json:"longestUnavailableSeconds"`
}

// MoveReport is a member that changed failure domain or incarnation.
type MoveReport struct {
	Member      string  `json:"member"`
	From        string  `json:"from"`
	To          string  `json:"to"`
	Incarnation int64   `json:"incarnation"`
	At          float64 `json:"atSeconds"`
}

// WorkloadInfo counts the recorded client workload.
type WorkloadInfo struct {
	Prefix      string `json:"prefix"`
	Puts        int    `json:"puts"`
	AckedPuts   int    `json:"ackedPuts"`
	UnknownPuts int    `json:"unknownPuts"`
	Gets        int    `json:"gets"`
	FailedOps   int64  `json:"failedOperations"`
	// MaxWriteGap is the longest time between two acknowledged puts;
	// MaxWriteGapStart when it began, in seconds after the failure.
	MaxWriteGap      float64 `json:"maxWriteGapSeconds"`
	MaxWriteGapStart float64 `json:"maxWriteGapStartSeconds"`
}

// Verdict is one pass/fail check.
type Verdict struct {
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Verdicts are the drill's checks.
type Verdicts struct {
	// Linearizable: porcupine found a linearization of the history.
	Linearizable Verdict `json:"linearizable"`
	// LostWrites: every unique key with an acknowledged put was read back.
	LostWrites LostWrites `json:"lostWrites"`
	// Watch: every watcher saw every acknowledged put once and in order.
	Watch WatchReport `json:"watch"`
	// Evacuated: the hub moved the zone's members while it was failed
	// (required only without --duration).
	Evacuated Verdict `json:"evacuated"`
	// Healed: the ring healed after the restore (a migration: Available,
	// and failure tolerant if it was, once moved).
	Healed Verdict `json:"healed"`
	// Tolerance (migrations only): etcd's own view never tolerated no
	// failure while the ring moved, if it tolerated one before.
	Tolerance *Verdict `json:"toleranceKept,omitempty"`
}

// LostWrites is the lost-write verdict.
type LostWrites struct {
	Verdict
	AckedKeys int `json:"ackedKeys"`
	Lost      int `json:"lost"`
	// LostKeys lists up to 20 of them.
	LostKeys []string `json:"lostKeys"`
}

// WatchReport is the watch verdict with one entry per watcher.
type WatchReport struct {
	Verdict
	Watchers []WatcherReport `json:"watchers"`
}

// WatcherReport is one watcher's verdict.
type WatcherReport struct {
	// Name is "all endpoints" or one endpoint.
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Expected acknowledged puts, of which Seen arrived once, in order,
	// with their value.
	Expected   int `json:"expected"`
	Seen       int `json:"seen"`
	Missed     int `json:"missed"`
	Duplicates int `json:"duplicates"`
	OutOfOrder int `json:"outOfOrder"`
	Mismatched int `json:"mismatched"`
	Unexpected int `json:"unexpected"`
	// Compacted counts acknowledged puts lost to a compaction.
	Compacted int    `json:"compacted"`
	Resumes   int    `json:"resumes"`
	Detail    string `json:"detail"`
}

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

func since(t *time.Time, t0 time.Time) *float64 {
	if t == nil {
		return nil
	}
	return ptr(seconds(t.Sub(t0)))
}

func verdict(err error, ok string) Verdict {
	if err != nil {
		return Verdict{Detail: err.Error()}
	}
	return Verdict{Pass: true, Detail: ok}
}

// workloadVerdicts turns the workload's checks into verdicts.
func workloadVerdicts(r *workload.Result) (Verdict, LostWrites, WatchReport) {
	lin := verdict(r.Linearizable, fmt.Sprintf("porcupine found a linearization of %d operations", r.Stats.Puts+r.Stats.Gets))
	lost := LostWrites{Verdict: verdict(r.Lost(), fmt.Sprintf("all %d unique keys with an acknowledged put read back", r.AckedKeys)),
		AckedKeys: r.AckedKeys, Lost: len(r.LostKeys), LostKeys: r.LostKeys[:min(len(r.LostKeys), 20)]}
	if lost.LostKeys == nil {
		lost.LostKeys = []string{}
	}
	w := WatchReport{Verdict: verdict(r.Watch(), fmt.Sprintf("%d watchers saw every acknowledged put once, in order, with its value", len(r.Watches)))}
	for _, v := range r.Watches {
		wr := WatcherReport{Name: v.Watcher, Pass: v.OK(), Expected: v.Expected, Seen: v.Seen, Missed: len(v.Missed) + len(v.NotReached)*boolInt(v.Incomplete),
			Duplicates: len(v.Duplicates), OutOfOrder: len(v.OutOfOrder), Mismatched: len(v.Mismatched), Unexpected: len(v.Unexpected),
			Compacted: len(v.CompactedAway), Resumes: v.Resumes, Detail: v.String()}
		w.Watchers = append(w.Watchers, wr)
	}
	return lin, lost, w
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// JSON writes the report as an indented JSON document.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Text writes the report for a human.
func (r *Report) Text(w io.Writer) error {
	var b strings.Builder
	if r.Migration != nil {
		r.migrationText(&b)
		r.verdictsText(&b)
		_, err := io.WriteString(w, b.String())
		return err
	}
	held := fmt.Sprintf("until the hub had moved its members (%.1fs)", r.Duration)
	if r.RequestedDuration > 0 {
		held = fmt.Sprintf("for %s", time.Duration(r.RequestedDuration*float64(time.Second)))
	}
	fmt.Fprintf(&b, "Drill zone-failure of EtcdCluster %s: zone %s (%s) failed by %s, held %s.\n", r.Cluster, r.Zone, strings.Join(r.ZoneClusters, ", "), r.Mode, held)
	fmt.Fprintf(&b, "The zone held %s of %d members.\n\n", strings.Join(r.ZoneMembers, ", "), r.Replicas)
	b.WriteString("Timeline (seconds after the failure began):\n")
	tw, row := timeline(&b)
	t := r.Times
	row("zone failed", ptr(0.0), fmt.Sprintf("(%s took %.1fs)", r.Mode, t.Injected))
	if r.Mode == ModeCordon {
		row("detected", t.Detected, "(a cordon is planned: no Degraded expected)")
	} else {
		row("detected", t.Detected, text.Truncate(t.DetectedBy, 100))
		row("a member Degraded", t.MemberDegraded, "")
	}
	row("first member moved out", t.FirstMove, t.FirstMoveBy)
	row("members replaced", t.Evacuated, "every member a ready voter outside the zone")
	row("zone restored", t.Restored, "")
	row("ring healed", t.Healed, "Available, all members ready voters, nothing in flight, "+map[bool]string{true: "failure tolerant, ", false: ""}[r.WasTolerant]+"no Degraded about the zone")
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nAvailability: not Available for %.1fs in total (longest %.1fs).\n", r.Availability.Unavailable, r.Availability.LongestUnavailable)
	if len(r.Moves) == 0 {
		b.WriteString("Members moved: none.\n")
	} else {
		b.WriteString("Members moved:\n")
		for _, m := range r.Moves {
			fmt.Fprintf(&b, "  %s: %s -> %s (incarnation %d) at %.1fs\n", m.Member, m.From, m.To, m.Incarnation, m.At)
		}
	}
	r.verdictsText(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// verdictsText writes the workload's numbers, the verdicts, the notes and
// the result.
func (r *Report) verdictsText(b *strings.Builder) {
	wl := r.Workload
	fmt.Fprintf(b, "Workload: %d puts (%d acknowledged, %d unknown), %d gets, %d failed operations; longest gap between acknowledged writes %.3fs (from %.1fs).\n\n",
		wl.Puts, wl.AckedPuts, wl.UnknownPuts, wl.Gets, wl.FailedOps, wl.MaxWriteGap, wl.MaxWriteGapStart)
	b.WriteString("Verdicts:\n")
	v := r.Verdicts
	line := func(name string, x Verdict) {
		mark := "PASS"
		if !x.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(b, "  %s  %-30s %s\n", mark, name, x.Detail)
	}
	line("linearizable", v.Linearizable)
	line("no acknowledged write lost", v.LostWrites.Verdict)
	line("watch complete and in order", v.Watch.Verdict)
	for _, wr := range v.Watch.Watchers {
		fmt.Fprintf(b, "        %s: %d of %d seen, %d missed, %d duplicated, %d out of order, %d resumes\n", wr.Name, wr.Seen, wr.Expected, wr.Missed, wr.Duplicates, wr.OutOfOrder, wr.Resumes)
	}
	if r.Migration != nil {
		line("members moved", v.Evacuated)
		line("ring Available once moved", v.Healed)
		if v.Tolerance != nil {
			line("failure tolerance kept", *v.Tolerance)
		}
	} else {
		line("members replaced", v.Evacuated)
		line("ring healed", v.Healed)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(b, "Note: %s\n", n)
	}
	if r.Pass {
		b.WriteString("\nResult: PASS\n")
	} else {
		fmt.Fprintf(b, "\nResult: FAIL (%s)\n", strings.Join(r.Failures, "; "))
	}
}

// migrationText writes a migration drill's header, timeline, tolerance
// and operations.
func (r *Report) migrationText(b *strings.Builder) {
	m := r.Migration
	fmt.Fprintf(b, "Drill migrate of EtcdCluster %s: %d members (%s) moved from %s to %s with one spec change (spec.topology.clusters).\n\n",
		r.Cluster, r.Replicas, strings.Join(m.Members, ", "), strings.Join(m.FromClusters, ", "), strings.Join(m.ToClusters, ", "))
	b.WriteString("Timeline (seconds after the spec change):\n")
	tw, row := timeline(b)
	t := r.Times
	row("spec changed", ptr(0.0), fmt.Sprintf("(the patch took %.1fs)", t.Injected))
	row("first member moved", t.FirstMove, t.FirstMoveBy)
	row("every member moved", t.Evacuated, "every member a ready voter in the new clusters, nothing in flight")
	row("ring Available", t.Healed, map[bool]string{true: "and failure tolerant", false: ""}[r.WasTolerant])
	_ = tw.Flush()
	fmt.Fprintf(b, "\nAvailability: not Available for %.1fs in total (longest %.1fs).\n", r.Availability.Unavailable, r.Availability.LongestUnavailable)
	minTol := "-"
	if m.MinFailuresTolerated != nil {
		minTol = fmt.Sprint(*m.MinFailuresTolerated)
	}
	fmt.Fprintf(b, "Failure tolerance (etcd's member list and every voter's status): %d before, at least %s over %d samples, at most %d voters.\n",
		m.FailuresToleratedBefore, minTol, m.ToleranceSamples, m.MaxVoters)
	if len(m.Operations) == 0 {
		b.WriteString("Operations: none.\n")
	} else {
		b.WriteString("Operations:\n")
		for _, o := range m.Operations {
			fmt.Fprintf(b, "  %s %s (%s) %s -> %s: began at %.1fs, %.1fs\n", o.Type, o.Member, o.Reason, orDash(o.From), orDash(o.To), o.Began, o.Seconds)
		}
	}
	if len(r.Moves) > 0 {
		b.WriteString("Members moved:\n")
		for _, mv := range r.Moves {
			fmt.Fprintf(b, "  %s: %s -> %s (incarnation %d) at %.1fs\n", mv.Member, mv.From, mv.To, mv.Incarnation, mv.At)
		}
	}
}

// timeline is a table of the report's times: row adds one ("-" for a
// time that did not come); flush the writer at the end.
func timeline(b *strings.Builder) (*tabwriter.Writer, func(what string, at *float64, detail string)) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	return tw, func(what string, at *float64, detail string) {
		v := "-"
		if at != nil {
			v = fmt.Sprintf("%.1f", *at)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", what, v, detail)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
