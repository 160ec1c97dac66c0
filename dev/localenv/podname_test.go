package localenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestComponentPodName: a component named like a pod (ComponentSpec.PodName)
// keeps its POD_NAME across a crash (a container restarted in its pod) and
// gets a new one when its pod is replaced (KillComponent with restartNow) or
// started again after a stop; a copy of its spec under another name, as a
// standby replica is started, gets none, so no two replicas share one.
func TestComponentPodName(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"logs", filepath.Join("run", "pids")} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := &Env{state: &State{Dir: dir}, comps: map[string]*compRun{}}
	names := filepath.Join(dir, "names")
	// Each start of the process appends the POD_NAME it was given ("-" for
	// none) to names, then waits to be killed.
	sh := func(name string, podName bool) ComponentSpec {
		return ComponentSpec{Name: name, Path: "/bin/sh", PodName: podName,
			Args: []string{"-c", `echo "${POD_NAME:--}" >> ` + names + `; exec sleep 600`}}
	}
	started := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			raw, _ := os.ReadFile(names)
			got := strings.Fields(string(raw))
			if len(got) >= n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d starts, want %d: %v", len(got), n, got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := e.startComponent(sh("hub", true)); err != nil {
		t.Skipf("cannot start /bin/sh: %v", err)
	}
	t.Cleanup(func() {
		for name := range e.comps {
			_ = e.StopComponent(name, time.Second)
		}
	})
	started(1)
	if _, err := e.KillComponent("hub", false); err != nil { // a crash
		t.Fatal(err)
	}
	started(2)
	if _, err := e.KillComponent("hub", true); err != nil { // the pod replaced
		t.Fatal(err)
	}
	started(3)
	if err := e.StopComponent("hub", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := e.StartComponent("hub"); err != nil { // a new pod
		t.Fatal(err)
	}
	started(4)
	if err := e.AddComponent(sh("hub-standby", false)); err != nil {
		t.Fatal(err)
	}
	got := started(5)
	if want := []string{"hub-1", "hub-1", "hub-2", "hub-3", "-"}; !slices.Equal(got, want) {
		t.Fatalf("POD_NAME at each start: %v, want %v", got, want)
	}
}
