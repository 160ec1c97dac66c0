package etcdcluster

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// TestEveryPlannerActionHasAnEntry: every Action constant the planner
// declares is taken by an entry of the action table (a step without one
// fails the pass with "unknown action").
func TestEveryPlannerActionHasAnEntry(t *testing.T) {
	declared := plannerActions(t)
	if len(declared) < 20 {
		t.Fatalf("found only %d Action constants in hub/planner: %v", len(declared), declared)
	}
	// Steps only recorded, never returned as a decision: a NOSPACE
	// recovery is recorded as beginning at Compact, and its first pass
	// takes it as Defragment (with the compaction first).
	recordedOnly := map[planner.Action]bool{planner.ActCompact: true}
	for _, a := range declared {
		if _, ok := actions[a]; !ok && !recordedOnly[a] {
			t.Errorf("planner action %q has no entry in actions (hub/etcdcluster/actions.go)", a)
		}
	}
	for a, e := range actions {
		if e.etcd && e.apply == nil {
			t.Errorf("action %q calls etcd but has no apply", a)
		}
		if a == "" {
			continue
		}
		found := false
		for _, d := range declared {
			found = found || d == a
		}
		if !found {
			t.Errorf("actions has %q, which the planner does not declare", a)
		}
	}
}

// plannerActions reads the constants of type planner.Action from the
// planner's source.
func plannerActions(t *testing.T) []planner.Action {
	t.Helper()
	files, err := filepath.Glob("../planner/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []planner.Action
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Action" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok {
						t.Fatalf("an Action constant that is not a literal: %#v", v)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, planner.Action(s))
				}
			}
		}
	}
	return out
}

// An original's retirement is told when its Retire ends, by whichever hub
// ends it: a hub killed right after the removal never sent the event of
// its step (TestScenarioAdopt missed one of three after a hub kill).
func TestRetireToldAtItsEnd(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: rec}
	s := ring()
	started := metav1.NewTime(now.Add(-3 * time.Second))
	op := &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationRetire, Member: "orig-0", MemberID: "ab12", Reason: planner.ReasonAdoption, StartedAt: started}
	d := &decision{plan: planner.Decision{Action: planner.ActFinish, Reason: "original member orig-0 [ab12] retired"}, ended: op}
	if err := r.applyFinish(context.Background(), &taking{s: s, d: d}); err != nil {
		t.Fatal(err)
	}
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if !slices.ContainsFunc(got, func(e string) bool {
		return strings.Contains(e, etcdfedv1.EventMemberRetired) && strings.Contains(e, "Retired original member orig-0 [ab12]")
	}) {
		t.Errorf("events at the Retire's end: %q; want MemberRetired naming orig-0 [ab12]", got)
	}
}
