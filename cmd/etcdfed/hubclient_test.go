package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/faultproxy"
)

// TestHubCommandsFailOnHungApiserver: a hub apiserver that accepts
// connections and never answers makes `etcdfed status` and `etcdfed
// client-cert` fail with a message naming it, after --request-timeout, never
// hang.
func TestHubCommandsFailOnHungApiserver(t *testing.T) {
	p, err := faultproxy.Start("127.0.0.1:0", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetMode(faultproxy.BlackHole)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: hung, cluster: {server: "https://` + p.Addr() + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: hung, user: u, namespace: default}}]
current-context: c
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", "demo"},
		{"client-cert", "demo", "--out", t.TempDir()},
	} {
		root.SetArgs(append(args, "--kubeconfig", kc, "--request-timeout", "1s"))
		root.SetOut(&strings.Builder{})
		root.SetErr(&strings.Builder{})
		start := time.Now()
		err := root.Execute()
		took := time.Since(start)
		if err == nil {
			t.Errorf("etcdfed %s against a hung apiserver: no error", args[0])
			continue
		}
		if !strings.Contains(err.Error(), p.Addr()) && !strings.Contains(err.Error(), "Timeout") && !strings.Contains(err.Error(), "deadline") {
			t.Errorf("etcdfed %s: error %q neither names the apiserver nor says it timed out", args[0], err)
		}
		t.Logf("etcdfed %s failed after %.1fs: %v", args[0], took.Seconds(), err)
	}
}
