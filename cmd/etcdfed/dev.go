package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/internal/repo"
)

// devFlags are the flags every `dev` subcommand shares.
var devFlags struct {
	stateDir string
}

var devCmd = &cobra.Command{
	Use:   "dev",
	Short: "Run etcdfed on this machine: real kube-apiservers as clusters, pods as local processes",
	Long: `The local environment runs a hub cluster and several member clusters as real
kube-apiservers on loopback addresses, with a node agent per member cluster
that registers nodes in zones and runs pods (etcd) as local processes on their
own loopback addresses. No Docker is needed; the binaries come from bin/
(make tools, make build).

  etcdfed dev up --detach           start it in the background
  eval "$(etcdfed dev env)"         point kubectl and etcdctl at it
  etcdfed dev status                what runs, with memory per process
  etcdfed dev fail-zone zone-2      kill a zone (or --mode partition, as root)
  etcdfed dev restore-zone zone-2
  etcdfed dev partition --groups 'hub,member-3|member-1,member-2'   (as root; --heal)
  etcdfed dev latency set three-regions   distance between zones and clusters (as root; none)
  etcdfed dev down                  stop everything (the state stays for the next up)`,
}

func init() {
	devCmd.PersistentFlags().StringVar(&devFlags.stateDir, "state-dir", defaultStateDir(),
		"directory holding the environment's state (kubeconfigs, data, logs, pid files)")
	// An environment of real nodes lives in a network namespace of its
	// own: every dev command but up (which makes it) runs in it.
	devCmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd == devUpCmd {
			return nil
		}
		return localenv.JoinNetwork(devFlags.stateDir)
	}
	root.AddCommand(devCmd)
}

// defaultStateDir is _state/dev in the repository when run from inside it,
// else ~/.local/state/etcdfed/dev.
func defaultStateDir() string {
	if v := os.Getenv("ETCDFED_STATE_DIR"); v != "" {
		return v
	}
	if root, err := repo.Root(); err == nil {
		return filepath.Join(root, "_state", "dev")
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "etcdfed", "dev")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "etcdfed", "dev")
	}
	return filepath.Join(os.TempDir(), "etcdfed-dev")
}

// binDir finds kube-apiserver, etcd and friends: ETCDFED_BIN_DIR, else the
// directory of this executable (bin/etcdfed sits next to them), else the
// repository's bin/.
func binDir() (string, error) {
	if v := os.Getenv("ETCDFED_BIN_DIR"); v != "" {
		return v, nil
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			dir := filepath.Dir(exe)
			if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err == nil {
				return dir, nil
			}
		}
	}
	dir, err := repo.BinDir()
	if err != nil {
		return "", fmt.Errorf("%w\n(or run the etcdfed built by `make build`, which sits in bin/ next to them)", err)
	}
	return dir, nil
}
