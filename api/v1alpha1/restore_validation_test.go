package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func fromSnapshot(object, source string) *etcdfedv1.ClusterBootstrap {
	return &etcdfedv1.ClusterBootstrap{FromSnapshot: &etcdfedv1.SnapshotSource{
		Store:         etcdfedv1.BackupStore{URL: "s3://etcd-backups/hub", S3: &etcdfedv1.S3StoreOptions{Endpoint: "http://127.0.0.1:7070", Insecure: true, ForcePathStyle: true}, CredentialsSecretName: "s3"},
		Object:        object,
		SourceCluster: source,
	}}
}

// spec.bootstrap.fromSnapshot: object latest (with its source cluster) or a
// snapshot key; the store is validated as spec.backup.store is; bootstrap
// is immutable, and can be neither added nor removed; EtcdMember's
// spec.bootstrap.restore takes a sha256 and a positive bump. Against a real
// apiserver.
func TestRestoreFieldsValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ctx := context.Background()
	ns := testenv.NamespaceT(t, apiserver, "restore")
	c := apiserver.Client

	for name, b := range map[string]*etcdfedv1.ClusterBootstrap{
		"latest":     fromSnapshot("latest", "team-a/main"),
		"object key": fromSnapshot("team-a/main/8e9e05c52164694d/20261123T120000.000Z-rev1234.db", ""),
	} {
		ec := validCluster(ns)
		ec.Spec.Bootstrap = b
		if err := c.Create(ctx, ec); err != nil {
			t.Errorf("%s: valid fromSnapshot rejected: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name string
		b    *etcdfedv1.ClusterBootstrap
		want string
	}{
		{"latest without source", fromSnapshot("latest", ""), "object latest needs sourceCluster"},
		{"not a snapshot key", fromSnapshot("team-a/main/x.json", ""), "object must be latest or a snapshot key ending in .db"},
		{"dot-dot", fromSnapshot("team-a/../x.db", ""), "must not contain '.' or '..' path segments"},
		{"bad source", fromSnapshot("latest", "main"), "spec.bootstrap.fromSnapshot.sourceCluster: Invalid value"},
		{"bad store", &etcdfedv1.ClusterBootstrap{FromSnapshot: &etcdfedv1.SnapshotSource{Store: etcdfedv1.BackupStore{URL: "ftp://x/y"}, Object: "latest", SourceCluster: "a/b"}}, "store.url must start with s3://"},
		{"no fromSnapshot", &etcdfedv1.ClusterBootstrap{}, "spec.bootstrap.fromSnapshot: Required value"},
	} {
		ec := validCluster(ns)
		ec.Spec.Bootstrap = tc.b
		wantInvalid(t, c.Create(ctx, ec), tc.want)
	}

	// Immutable, and neither added nor removed.
	ec := validCluster(ns)
	ec.Spec.Bootstrap = fromSnapshot("latest", "team-a/main")
	if err := c.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	changed := ec.DeepCopy()
	changed.Spec.Bootstrap.FromSnapshot.Object = "team-a/main/8e9e05c52164694d/20261123T120000.000Z-rev1234.db"
	wantInvalid(t, c.Patch(ctx, changed, client.MergeFrom(ec)), "spec.bootstrap is immutable")
	removed := ec.DeepCopy()
	removed.Spec.Bootstrap = nil
	wantInvalid(t, c.Update(ctx, removed), "spec.bootstrap cannot be added or removed after creation")
	plain := validCluster(ns)
	if err := c.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	added := plain.DeepCopy()
	added.Spec.Bootstrap = fromSnapshot("latest", "team-a/main")
	wantInvalid(t, c.Update(ctx, added), "spec.bootstrap cannot be added or removed after creation")

	// The member's restore.
	restore := func(sha string, bump int64) *etcdfedv1.EtcdMember {
		m := validMember(ns)
		m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=https://main-0.etcd.example.com:2380", InitialClusterState: etcdfedv1.InitialClusterNew, Token: "t",
			Restore: &etcdfedv1.MemberRestore{Store: etcdfedv1.BackupStore{URL: "file:///var/backups"}, Object: "a/b/c/x.db", SHA256: sha, RevisionBump: bump}}
		return m
	}
	if err := c.Create(ctx, restore(strings.Repeat("ab", 32), etcdfedv1.DefaultRestoreRevisionBump)); err != nil {
		t.Errorf("valid member restore rejected: %v", err)
	}
	wantInvalid(t, c.Create(ctx, restore("xyz", 1)), "spec.bootstrap.restore.sha256")
	withID := restore(strings.Repeat("ab", 32), 1)
	withID.Spec.Bootstrap.ClusterID = "8e9e05c52164694d"
	if err := c.Create(ctx, withID); err != nil {
		t.Errorf("bootstrap.clusterID rejected: %v", err)
	}
	badID := restore(strings.Repeat("ab", 32), 1)
	badID.Spec.Bootstrap.ClusterID = "XYZ"
	wantInvalid(t, c.Create(ctx, badID), "spec.bootstrap.clusterID")
	wantInvalid(t, c.Create(ctx, restore(strings.Repeat("ab", 32), 0)), "spec.bootstrap.restore.revisionBump")
}
