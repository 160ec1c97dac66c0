package nemesis

import (
	"fmt"
	"strings"
	"time"
)

// Result is what one schedule's run gave.
type Result struct {
	Schedule Schedule
	// Operations the linearizability check covered (puts and gets);
	// Acked puts acknowledged.
	Operations, Acked int
	// MaxWriteGap is the longest time between two acknowledged puts.
	MaxWriteGap time.Duration
	// LeaderAnswers is how many answers of members about themselves the
	// leader watch judged.
	LeaderAnswers int
	// Took is the schedule's run, from the first fault until the ring
	// was whole again and checked.
	Took time.Duration
	// Violations say what broke (empty: nothing).
	Violations []string
}

// Summary adds up a run's results.
type Summary struct {
	Seed    uint64
	Profile string
	Results []Result
}

// Violations counts the schedules with a violation.
func (s Summary) Violations() int {
	n := 0
	for _, r := range s.Results {
		if len(r.Violations) > 0 {
			n++
		}
	}
	return n
}

func (s Summary) String() string {
	faults, beyond := map[Kind]int{}, map[Kind]int{}
	ops, acked, answers, automatic := 0, 0, 0, 0
	var gap, took time.Duration
	gapIn := -1
	for _, r := range s.Results {
		for _, f := range r.Schedule.Faults {
			faults[f.Kind]++
			if f.Kind != KillHub && f.Hold > r.Schedule.Profile.Grace {
				beyond[f.Kind]++
			}
		}
		if r.Schedule.Automatic {
			automatic++
		}
		ops += r.Operations
		acked += r.Acked
		answers += r.LeaderAnswers
		took += r.Took
		if r.MaxWriteGap > gap {
			gap, gapIn = r.MaxWriteGap, r.Schedule.Index
		}
	}
	var kinds []string
	total := 0
	for _, k := range Kinds {
		if k == Distance && faults[k] == 0 {
			continue // profiles without distance read as before it existed
		}
		total += faults[k]
		part := fmt.Sprintf("%s %d", k, faults[k])
		if k != KillHub && faults[k] > 0 {
			part += fmt.Sprintf(" (%d beyond the grace)", beyond[k])
		}
		kinds = append(kinds, part)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis seed %d, profile %s: %d schedules (%d with quorumLossRecovery Automatic) in %s\n", s.Seed, s.Profile, len(s.Results), automatic, took.Round(time.Second))
	fmt.Fprintf(&b, "  faults: %d: %s\n", total, strings.Join(kinds, ", "))
	fmt.Fprintf(&b, "  operations checked (linearizable): %d; writes acknowledged: %d; leader answers judged: %d\n", ops, acked, answers)
	if gapIn >= 0 {
		fmt.Fprintf(&b, "  longest write gap: %s (schedule %d)\n", gap.Round(time.Millisecond), gapIn)
	}
	if s.Violations() == 0 {
		b.WriteString("  violations: none")
		return b.String()
	}
	fmt.Fprintf(&b, "  violations: %d schedule(s)", s.Violations())
	for _, r := range s.Results {
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "\n    schedule %d: %s", r.Schedule.Index, v)
		}
	}
	return b.String()
}
