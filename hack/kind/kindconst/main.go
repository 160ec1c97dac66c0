// Command kindconst prints a string constant of kind's node image builder
// (sigs.k8s.io/kind/pkg/build/nodeimage) from the kind module in the Go
// module cache, so hack/kind/node-image.sh writes exactly the manifests and
// image names that `kind build node-image` of the pinned kind release
// writes, without copying them into this repository.
//
//	go run ./hack/kind/kindconst DIR NAME
//
// DIR is the module's pkg/build/nodeimage directory; NAME a constant such as
// defaultCNIManifest, defaultStorageManifest, kindnetdImage,
// storageProvisionerImage or storageHelperImage. The constants live in
// const_*.go files that import nothing, so those files are type-checked
// alone and the constant's value (string concatenations included) is
// printed as is.
package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: kindconst DIR NAME")
		os.Exit(2)
	}
	v, err := lookup(os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kindconst:", err)
		os.Exit(1)
	}
	fmt.Print(v)
}

func lookup(dir, name string) (string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "const*.go"))
	if err != nil {
		return "", fmt.Errorf("list constants: %w", err)
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("no const*.go in %s", dir)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", p, err)
		}
		if len(f.Imports) > 0 {
			continue // only self-contained constant files
		}
		files = append(files, f)
	}
	pkg, err := (&types.Config{}).Check("nodeimage", fset, files, nil)
	if err != nil {
		return "", fmt.Errorf("type-check %s: %w", dir, err)
	}
	c, ok := pkg.Scope().Lookup(name).(*types.Const)
	if !ok {
		return "", fmt.Errorf("no constant %s in %s", name, dir)
	}
	if c.Val().Kind() != constant.String {
		return "", fmt.Errorf("constant %s is not a string", name)
	}
	return constant.StringVal(c.Val()), nil
}
