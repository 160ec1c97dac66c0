// Package crd embeds the generated CustomResourceDefinitions, so binaries and
// tests install exactly what `make generate` produced.
package crd

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed etcdfed.dev_*.yaml
var files embed.FS

// All returns every etcdfed CRD, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "etcdfed.dev_*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list embedded CRDs: %w", err)
	}
	sort.Strings(names)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read embedded CRD %s: %w", n, err)
		}
		data = bytes.TrimPrefix(data, []byte("---\n"))
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decode embedded CRD %s: %w", n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
