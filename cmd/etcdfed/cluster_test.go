package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/hub/registration"
)

// TestClusterCommandsRefuseBadFlags: bad input is refused before anything
// is contacted, with what to give instead.
func TestClusterCommandsRefuseBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "join", "m1"}, "--kubeconfig-member is required"},
		{[]string{"cluster", "unjoin", "m1"}, "--kubeconfig-member is required"},
		{[]string{"cluster", "join", "m1", "--kubeconfig-member", "/nonexistent", "--kubeconfig", "/nonexistent"}, "hub kubeconfig"},
		{[]string{"hub", "install", "--hub", "nowhere", "--kubeconfig", "/dev/null"}, "--hub \"nowhere\": want deploy or external"},
		{[]string{"cluster", "join", "m1", "--spoke", "inside", "--kubeconfig-member", "/dev/null"}, "--spoke \"inside\": want deploy or external"},
		{[]string{"cluster", "join", "m1", "--spoke", "deploy", "--label", "region", "--kubeconfig-member", "/dev/null"}, "--label \"region\": want KEY=VALUE"},
	} {
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

func TestPrintClusters(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	err := printClusters(&out, []install.Cluster{
		{Name: "member-1", Server: "https://10.0.0.1:6443", Reported: true, Status: registration.Status{Engaged: true, Spoke: "Alive"},
			Expires: now.Add(20 * time.Hour), Members: []string{"default/main/main-0"}},
		{Name: "member-2", Server: "https://10.0.0.2:6443", Reported: true, Status: registration.Status{Spoke: "Stale", Problem: "apiserver not answering"},
			Expires: now.Add(-time.Minute)},
		{Name: "member-3", Server: "https://10.0.0.3:6443"},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"member-1  https://10.0.0.1:6443  true     Alive  expires in 20h0m0s    default/main/main-0",
		"EXPIRED (join again)",
		"apiserver not answering",
		"member-3  https://10.0.0.3:6443  ?        ?      not etcdfed's",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("cluster list lacks %q:\n%s", want, got)
		}
	}
	out.Reset()
	if err := printClusters(&out, nil, now); err != nil || !strings.Contains(out.String(), "etcdfed cluster join NAME") {
		t.Errorf("an empty list: %q (%v)", out.String(), err)
	}
}
