package drill

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/dev/workload"
)

func testDrill(mode Mode, duration time.Duration) *drill {
	return &drill{in: Input{Zone: Zone{Name: "zone-1"}, Mode: mode, Duration: duration, Timeout: 10 * time.Minute},
		key: client.ObjectKey{Namespace: "ns", Name: "main"}, t0: at(-10),
		plan: Plan{Members: []string{"main-0"}, Clusters: []string{"member-1"}, Replicas: 3, Tolerant: true}}
}

func passingResult() *workload.Result {
	return &workload.Result{Stats: workload.Stats{Puts: 100, AckedPuts: 98, UnknownPuts: 2, Gets: 50}, AckedKeys: 40,
		Watches: []workload.WatchVerdict{{Watcher: "all endpoints", Expected: 98, Seen: 98, Covered: 200, LastAcked: 200}}}
}

// The JSON document keeps its field names (docs/failures.md documents
// them): a renamed field breaks this test.
func TestReportJSONFields(t *testing.T) {
	tl := Timeline{Detected: ptr(at(3)), DetectedBy: "member cluster member-1 failed", FirstMove: ptr(at(33)), Evacuated: ptr(at(50)), Healed: ptr(at(80)),
		Moves: []Move{{Member: "main-0", From: "member-1/zone-1", To: "member-2/zone-2", Incarnation: 2, At: at(34)}}}
	r := testDrill(ModeKill, 0).report(tl, passingResult(), at(0), at(51), at(95), 400*time.Millisecond, 1200*time.Millisecond, at(0.3), "etcdfed-drill/x/", nil)
	if !r.Pass {
		t.Fatalf("report fails: %v", r.Failures)
	}
	var buf bytes.Buffer
	if err := r.JSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		where string
		m     map[string]any
		want  string
	}{
		{"top", doc, "availability,cluster,drillSeconds,durationSeconds,failures,kind,mode,moves,notes,pass,replicas,requestedDurationSeconds,startedAt,times,verdicts,version,wasFailureTolerant,workload,zone,zoneClusters,zoneMembers"},
		{"times", doc["times"].(map[string]any), "detectedBy,detectedSeconds,evacuatedSeconds,firstMoveBy,firstMoveSeconds,healedSeconds,injectedSeconds,memberDegradedSeconds,restoredSeconds"},
		{"workload", doc["workload"].(map[string]any), "ackedPuts,failedOperations,gets,maxWriteGapSeconds,maxWriteGapStartSeconds,prefix,puts,unknownPuts"},
		{"verdicts", doc["verdicts"].(map[string]any), "evacuated,healed,linearizable,lostWrites,watch"},
		{"lostWrites", doc["verdicts"].(map[string]any)["lostWrites"].(map[string]any), "ackedKeys,detail,lost,lostKeys,pass"},
		{"watcher", doc["verdicts"].(map[string]any)["watch"].(map[string]any)["watchers"].([]any)[0].(map[string]any),
			"compacted,detail,duplicates,expected,mismatched,missed,name,outOfOrder,pass,resumes,seen,unexpected"},
		{"move", doc["moves"].([]any)[0].(map[string]any), "atSeconds,from,incarnation,member,to"},
	} {
		if got := strings.Join(keys(c.m), ","); got != c.want {
			t.Errorf("%s keys:\n got %s\nwant %s", c.where, got, c.want)
		}
	}
	times := doc["times"].(map[string]any)
	if times["detectedSeconds"] != 3.0 || times["memberDegradedSeconds"] != nil || times["healedSeconds"] != 80.0 || times["restoredSeconds"] != 51.0 {
		t.Errorf("times %v", times)
	}
	// The failure was held from +0 to the restore at +51 (no --duration):
	// 51 s, not the 0 asked for (a 168 s drill reported 0 before).
	if doc["durationSeconds"] != 51.0 || doc["requestedDurationSeconds"] != 0.0 || doc["drillSeconds"] != 105.0 {
		t.Errorf("durationSeconds %v, requestedDurationSeconds %v, drillSeconds %v; want 51, 0, 105", doc["durationSeconds"], doc["requestedDurationSeconds"], doc["drillSeconds"])
	}
	if doc["workload"].(map[string]any)["maxWriteGapStartSeconds"] != 0.3 {
		t.Errorf("workload %v", doc["workload"])
	}
}

// Every failed check fails the report and says why; the text says FAIL.
func TestReportFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(*workload.Result, *Timeline)
		duration time.Duration
		want     string
	}{
		{"not linearizable", func(r *workload.Result, _ *Timeline) { r.Linearizable = workload.ErrNotLinearizable }, 0, "linearizable: workload: history is not linearizable"},
		{"write lost", func(r *workload.Result, _ *Timeline) { r.LostKeys = []string{"p/unique/c1-1"} }, 0, "lost writes: workload: acknowledged writes lost: 1 of 40: p/unique/c1-1"},
		{"read back failed", func(r *workload.Result, _ *Timeline) { r.ReadBack = errors.New("read back p/unique/*: timeout") }, 0, "lost writes: read back"},
		{"watch gap", func(r *workload.Result, _ *Timeline) { r.Watches[0].Missed = []int64{150}; r.Watches[0].Seen = 97 }, 0, "watch: workload: watch incomplete or out of order: watcher all endpoints: 1 acknowledged puts missed (revisions 150)"},
		{"not evacuated", func(_ *workload.Result, tl *Timeline) { tl.Evacuated = nil }, 0, "members replaced: the hub did not move every member out of zone-1 within 10m0s"},
		{"not healed", func(_ *workload.Result, tl *Timeline) { tl.Healed = nil }, 0, "healed: the ring did not heal within 10m0s of the restore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := passingResult()
			tl := Timeline{Evacuated: ptr(at(50)), Healed: ptr(at(80))}
			tc.mutate(res, &tl)
			r := testDrill(ModeKill, tc.duration).report(tl, res, at(0), at(51), at(95), 0, 0, time.Time{}, "p/", nil)
			if r.Pass || !slices.ContainsFunc(r.Failures, func(f string) bool { return strings.HasPrefix(f, tc.want) }) {
				t.Fatalf("pass %v, failures %q, want one starting %q", r.Pass, r.Failures, tc.want)
			}
			var buf bytes.Buffer
			if err := r.Text(&buf); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "Result: FAIL") || !strings.Contains(buf.String(), "  FAIL  ") {
				t.Errorf("text report does not say FAIL:\n%s", buf.String())
			}
		})
	}
	// With --duration, members not being replaced is not a failure.
	r := testDrill(ModeKill, 20*time.Second).report(Timeline{Healed: ptr(at(30))}, passingResult(), at(0), at(20), at(40), 0, 0, time.Time{}, "p/", nil)
	if !r.Pass {
		t.Errorf("a held failure without replacement fails: %v", r.Failures)
	}
	var buf bytes.Buffer
	if err := r.Text(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`held for 20s`, `Result: PASS`, `members replaced +- `, `zone restored +20\.0 `, `ring healed +30\.0 `} {
		if !regexp.MustCompile(want).MatchString(buf.String()) {
			t.Errorf("text report lacks %q:\n%s", want, buf.String())
		}
	}
}
