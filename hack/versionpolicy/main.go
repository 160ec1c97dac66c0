// Command versionpolicy writes what pkg/etcdversion's policy decides into
// the files that state it: the CRD rules on EtcdClusterSpec.Version (as
// kubebuilder markers, which controller-gen then turns into the CRD) and
// the version matrix in docs/upgrades.md. `make generate` runs it before
// controller-gen; its test fails when either file is stale.
//
// Usage: go run ./hack/versionpolicy [-root DIR]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// Files it writes, relative to the repository root.
const (
	TypesFile = "api/v1alpha1/etcdcluster_types.go"
	DocFile   = "docs/upgrades.md"
)

// versionField is the line of the field whose rules are generated.
const versionField = "\tVersion string `json:\"version\"`"

const xvalidation = "// +kubebuilder:validation:XValidation:"

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "versionpolicy:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	for _, f := range []struct {
		path    string
		rewrite func([]byte) ([]byte, error)
	}{{TypesFile, RewriteMarkers}, {DocFile, RewriteMatrix}} {
		p := filepath.Join(root, f.path)
		old, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out, err := f.rewrite(old)
		if err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
		if !bytes.Equal(old, out) {
			if err := os.WriteFile(p, out, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// RewriteMarkers replaces the XValidation markers in the comment above
// EtcdClusterSpec.Version with the policy's, right above the field.
func RewriteMarkers(src []byte) ([]byte, error) {
	lines := strings.Split(string(src), "\n")
	at := -1
	for i, l := range lines {
		if l == versionField {
			if at >= 0 {
				return nil, errors.New("the version field appears twice")
			}
			at = i
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("no line %q", versionField)
	}
	start := at
	for start > 0 && strings.HasPrefix(strings.TrimSpace(lines[start-1]), "//") {
		start--
	}
	var comment []string
	for _, l := range lines[start:at] {
		if !strings.HasPrefix(strings.TrimSpace(l), xvalidation) {
			comment = append(comment, l)
		}
	}
	for _, m := range etcdversion.Markers() {
		comment = append(comment, "\t"+m)
	}
	out := append(append(append([]string{}, lines[:start]...), comment...), lines[at:]...)
	return []byte(strings.Join(out, "\n")), nil
}

// RewriteMatrix replaces the text between the matrix delimiters.
func RewriteMatrix(doc []byte) ([]byte, error) {
	s := string(doc)
	b := strings.Index(s, etcdversion.MatrixBegin)
	e := strings.Index(s, etcdversion.MatrixEnd)
	if b < 0 || e < b {
		return nil, fmt.Errorf("no %q ... %q section", etcdversion.MatrixBegin, etcdversion.MatrixEnd)
	}
	head := s[:b+len(etcdversion.MatrixBegin)]
	return []byte(head + "\n\n" + etcdversion.Matrix() + "\n" + s[e:]), nil
}
