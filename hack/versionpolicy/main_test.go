package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// TestGeneratedFilesCurrent: the CRD rules on spec.version and the version
// matrix in the docs are what the policy gives today. A change to
// pkg/etcdversion without `make generate` fails here (and `make verify`
// fails on the CRD controller-gen then writes).
func TestGeneratedFilesCurrent(t *testing.T) {
	for _, f := range []struct {
		path    string
		rewrite func([]byte) ([]byte, error)
	}{{TypesFile, RewriteMarkers}, {DocFile, RewriteMatrix}} {
		old, err := os.ReadFile(filepath.Join("..", "..", f.path))
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.rewrite(old)
		if err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
		if !bytes.Equal(old, want) {
			t.Errorf("%s is stale: run make generate (go run ./hack/versionpolicy) and commit", f.path)
		}
	}
}

func TestRewriteMarkersIsStable(t *testing.T) {
	src := []byte("type S struct {\n\t// version is it.\n\t// +kubebuilder:validation:MaxLength=32\n\t// +kubebuilder:validation:XValidation:rule=\"old\",message=\"old\"\n" + versionField + "\n}\n")
	once, err := RewriteMarkers(src)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := RewriteMarkers(once)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(once, twice) {
		t.Errorf("a second run changed the file:\n%s\n---\n%s", once, twice)
	}
	if bytes.Contains(once, []byte(`rule="old"`)) {
		t.Errorf("the old rule stayed:\n%s", once)
	}
	if !bytes.Contains(once, []byte("// version is it.\n\t// +kubebuilder:validation:MaxLength=32\n\t// +kubebuilder:validation:XValidation:")) {
		t.Errorf("the doc comment and other markers must stay, the rules right above the field:\n%s", once)
	}
}

// The sample EtcdCluster runs the policy's default.
func TestSampleRunsTheDefault(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "etcdcluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "version: \"" + etcdversion.Default().String() + "\""
	if !bytes.Contains(b, []byte(want)) {
		t.Errorf("config/samples/etcdcluster.yaml does not hold %s", want)
	}
}
