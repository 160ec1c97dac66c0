package main

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestApplyEnv(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	ns := fs.String("namespace", "etcdfed-system", "")
	seeds := fs.StringSlice("gossip-seed", nil, "")
	le := fs.Bool("leader-elect", true, "")
	if err := fs.Parse([]string{"--namespace=from-flag"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ETCDFED_SPOKE_NAMESPACE", "from-env")
	t.Setenv("ETCDFED_SPOKE_GOSSIP_SEED", "a:1,b:2")
	t.Setenv("ETCDFED_SPOKE_LEADER_ELECT", "false")
	if err := applyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if *ns != "from-flag" {
		t.Errorf("namespace %q: the command line must win", *ns)
	}
	if len(*seeds) != 2 || (*seeds)[1] != "b:2" || *le {
		t.Errorf("from env: seeds %v leader-elect %v", *seeds, *le)
	}
	t.Setenv("ETCDFED_SPOKE_LEADER_ELECT", "maybe")
	fs2 := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs2.Bool("leader-elect", true, "")
	if err := applyEnv(fs2); err == nil {
		t.Error("a bad value in the environment was accepted")
	}
}
