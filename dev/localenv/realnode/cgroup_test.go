package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// TestNodeRestartsInKilledCgroup: a node killed (KillCgroup: cgroup.kill
// and SIGKILL in every hierarchy) starts again after ResetCgroup, its
// first process placed in the node's cgroup as the environment places
// the anchor (proc.Spec.Cgroup, CLONE_INTO_CGROUP). Reusing the killed
// cgroup instead had the kernel kill that process before it ran.
func TestNodeRestartsInKilledCgroup(t *testing.T) {
	cg2, err := proc.Cgroup2Root()
	if err != nil || os.Geteuid() != 0 {
		t.Skipf("needs root and a writable cgroup2 hierarchy (%v)", err)
	}
	rel := fmt.Sprintf("etcdfed-test-%d/node-0", os.Getpid())
	t.Cleanup(func() {
		if err := RemoveCgroup(filepath.Dir(rel)); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	life := 0
	start := func() *proc.Process {
		t.Helper()
		life++
		log := filepath.Join(dir, fmt.Sprintf("life-%d.log", life))
		p, err := proc.Start(proc.Spec{Name: "anchor", Path: "/bin/sh", Args: []string{"-c", "echo up; exec sleep 600"},
			LogPath: log, Cgroup: filepath.Join(cg2, rel, "system")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(0) })
		// Up once it wrote its line; dead if it exited first.
		err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			select {
			case <-p.Done():
				code, sig, _ := p.Exit()
				return false, fmt.Errorf("life %d: the process exited (code %d, signal %q) before it ran", life, code, sig)
			default:
			}
			out, _ := os.ReadFile(log)
			return strings.Contains(string(out), "up"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := ResetCgroup(rel, "system"); err != nil {
		t.Fatal(err)
	}
	first := start()
	if err := KillCgroup(rel); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	if err := ResetCgroup(rel, "system"); err != nil {
		t.Fatal(err)
	}
	start()
}
