package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// TestHubExportImport runs `etcdfed hub export` against one apiserver and
// `etcdfed hub import` against another: the file is private (0600) and
// armored, the manifest printed; an identity the file was not encrypted
// to is refused with a message saying so and writes nothing; the right
// one writes the gossip key byte-identical.
func TestHubExportImport(t *testing.T) {
	from, _, fromKC := cliAPIServer(t, "cli-escrow-old", "escrow")
	to, _, toKC := cliAPIServer(t, "cli-escrow-new", "escrow")
	ctx := context.Background()
	if err := from.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "etcdfed-system"}}); err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{3}, 32)
	if err := from.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName},
		Data: map[string][]byte{"key": key}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	operator, _ := age.GenerateX25519Identity()
	other, _ := age.GenerateX25519Identity()
	idFile, otherFile, bundle := filepath.Join(dir, "operator.key"), filepath.Join(dir, "other.key"), filepath.Join(dir, "hub.age")
	if err := os.WriteFile(idFile, []byte("# operator\n"+operator.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherFile, []byte(other.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		err := root.ExecuteContext(ctx)
		for _, name := range []string{"export", "import"} {
			if cmd, _, ferr := root.Find([]string{"hub", name}); ferr == nil {
				cmd.Flags().VisitAll(func(f *pflag.Flag) {
					if sv, ok := f.Value.(pflag.SliceValue); ok {
						_ = sv.Replace(nil)
					} else {
						_ = f.Value.Set(f.DefValue)
					}
					f.Changed = false
				})
			}
		}
		return out.String(), err
	}

	out, err := run("hub", "export", "--kubeconfig", fromKC, "--recipient", operator.Recipient().String(), "-o", bundle)
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	if !strings.Contains(out, "gossip-key   etcdfed-system/"+etcdfedv1.GossipSecretName) {
		t.Errorf("export's manifest:\n%s", out)
	}
	fi, err := os.Stat(bundle)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(bundle)
	if fi.Mode().Perm() != 0o600 || !bytes.HasPrefix(raw, []byte("-----BEGIN AGE ENCRYPTED FILE-----")) || bytes.Contains(raw, key) {
		t.Errorf("bundle mode %v, starts %.40q", fi.Mode().Perm(), raw)
	}
	if out, err := run("hub", "export", "--kubeconfig", fromKC, "--recipient", operator.Recipient().String(), "-o", bundle); err == nil {
		t.Errorf("export over an existing file succeeded:\n%s", out)
	}

	out, err = run("hub", "import", "--kubeconfig", toKC, "-i", bundle, "--identity", otherFile)
	if err == nil || !strings.Contains(err.Error(), "encrypted to other recipients") {
		t.Fatalf("import with another identity: %v\n%s", err, out)
	}
	if err := to.Client.Get(ctx, client.ObjectKey{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName}, &corev1.Secret{}); err == nil {
		t.Fatal("a refused import wrote the gossip key")
	}
	out, err = run("hub", "import", "--kubeconfig", toKC, "-i", bundle, "--identity", idFile)
	if err != nil || !strings.Contains(out, "1 created") {
		t.Fatalf("import: %v\n%s", err, out)
	}
	got := &corev1.Secret{}
	if err := to.Client.Get(ctx, client.ObjectKey{Namespace: "etcdfed-system", Name: etcdfedv1.GossipSecretName}, got); err != nil || !bytes.Equal(got.Data["key"], key) {
		t.Fatalf("imported gossip key %x, %v", got.Data["key"], err)
	}
}
