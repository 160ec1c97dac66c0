package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/backup"
	"github.com/etcdfed/etcdfed/hub/tenancy"
)

// TestBackupCommand runs `etcdfed backup NAME --wait` against a real
// apiserver with the hub's backup controller and a real etcd: it prints
// where the snapshot went; a store that cannot be written makes it fail
// with the reason; an EtcdCluster without spec.backup is refused up front.
func TestBackupCommand(t *testing.T) {
	api, ns, kubeconfig := cliAPIServer(t, "cli-backup", "cli")
	ctx := context.Background()
	testenv.StartManager(t, api, "", func(mgr ctrl.Manager) error {
		// file:// stores: the hub's filesystem, allowed here.
		return (&backup.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), ScratchDir: t.TempDir(),
			Policy: tenancy.Policy{AmbientStoreCredentials: true}}).SetupWithManager(mgr)
	})

	e := etcdtest.Start(t, etcdtest.Options{Members: 1, Name: "cli"})
	st, err := e.NewClient().Status(ctx, e.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	storeDir := t.TempDir()
	for name, b := range map[string]*etcdfedv1.BackupSpec{
		"good":     {Schedule: "0 0 1 1 *", Suspend: true, Store: etcdfedv1.BackupStore{URL: "file://" + storeDir}},
		"blocked":  {Schedule: "0 0 1 1 *", Suspend: true, Store: etcdfedv1.BackupStore{URL: "file://" + blocker + "/sub"}},
		"nobackup": nil,
	} {
		ec := &etcdfedv1.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: etcdfedv1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: name + ".etcd.test"},
				TLS: etcdfedv1.TLSSpec{Mode: etcdfedv1.TLSDisabled}, Backup: b},
		}
		if err := api.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
		// The backup controller writes this status too (BackupHealthy) as
		// soon as the object exists: retry on its write.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := api.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
				return err
			}
			ec.Status.ClusterID = strconv.FormatUint(st.Header.ClusterId, 16)
			ec.Status.Endpoints = e.Endpoints()
			return api.Client.Status().Update(ctx, ec)
		}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "-n", ns, "--kubeconfig", kubeconfig, "--timeout", "2m"))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}

	out, err := run("backup", "good", "--wait")
	if err != nil {
		t.Fatalf("backup good: %v\n%s", err, out)
	}
	for _, want := range []string{"Requested a backup of EtcdCluster " + ns + "/good", "Stored file://" + storeDir + "/" + ns + "/good/", "from member cli-0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	start := time.Now()
	out, err = run("backup", "blocked", "--wait")
	if err == nil || !strings.Contains(err.Error(), "failed ("+etcdfedv1.BackupReasonStoreUnreachable+")") {
		t.Errorf("backup blocked: %v, want a StoreUnreachable failure\n%s", err, out)
	}
	t.Logf("failure reported in %s", time.Since(start).Round(time.Millisecond))
	if _, err := run("backup", "nobackup"); err == nil || !strings.Contains(err.Error(), "has no spec.backup") {
		t.Errorf("backup nobackup: %v, want a refusal", err)
	}
}
