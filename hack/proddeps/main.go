// Command proddeps checks etcdfed's dependency rules; `make verify` runs
// it.
//
// The floors (layers.go): no package imports, outside its tests, from a
// floor above its own: base (api/, config/, pkg/, internal/, dnsprovider/)
// below components (hub/, spoke/) below the CLI's commands (cli/) below dev
// tooling (dev/, test/, hack/ and fixture packages) below the binaries
// (cmd/). Each import running up is printed.
//
// The binaries: a production binary (hub, spoke, the etcdfed-init helper)
// links no test or dev code: the standard library's testing packages,
// envtest, etcdfed's test fixtures or its local environment. For every
// forbidden package it prints the chain of imports that brings it in, so
// the fix is plain.
//
// It reads the import graph from `go list` with the images' build settings
// (CGO_ENABLED=0, linux).
//
//	go run ./hack/proddeps                 # the floors and the production binaries
//	go run ./hack/proddeps ./cmd/spoke     # only these binaries
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Production lists the main packages of the binaries etcdfed ships.
var Production = []string{"./cmd/hub", "./cmd/spoke", "./cmd/etcdfed-init"}

func main() {
	pkgs := os.Args[1:]
	bad, up := 0, 0
	if len(pkgs) == 0 {
		pkgs = Production
		g, err := treeGraph()
		if err != nil {
			fmt.Fprintf(os.Stderr, "proddeps: %v\n", err)
			os.Exit(2)
		}
		upward := CheckLayers(g)
		for _, u := range upward {
			fmt.Printf("import runs up a floor: %s\n", u)
		}
		if up = len(upward); up > 0 {
			fmt.Printf("proddeps: %d import(s) run up a floor; move the code both need down, or the importer up\n", up)
		} else {
			fmt.Printf("proddeps: no import runs up a floor\n")
		}
	}
	for _, p := range pkgs {
		g, root, err := importGraph(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "proddeps: %s: %v\n", p, err)
			os.Exit(2)
		}
		found := Check(g, root)
		for _, f := range found {
			fmt.Printf("%s links %s (%s):\n    %s\n", p, f.Package, f.Why, strings.Join(f.Chain, "\n -> "))
		}
		bad += len(found)
	}
	if bad > 0 {
		fmt.Printf("proddeps: %d forbidden package(s) in production binaries; move the code they need out of the test or dev package\n", bad)
	}
	if bad > 0 || up > 0 {
		os.Exit(1)
	}
	fmt.Printf("proddeps: %s link no test or dev code\n", strings.Join(pkgs, ", "))
}

// treeGraph runs go list on all of etcdfed's packages and returns each
// one's imports, its tests' imports left out.
func treeGraph() (map[string][]string, error) {
	g, _, err := goList(Module + "/...")
	return g, err
}

// importGraph runs go list -deps on pkg and returns each package's imports
// and pkg's own import path.
func importGraph(pkg string) (map[string][]string, string, error) {
	return goList("-deps", pkg)
}

// goList runs go list with args and returns each listed package's
// imports and the last package listed.
func goList(args ...string) (map[string][]string, string, error) {
	args = append([]string{"list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, args...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("go list: %w\n%s", err, stderr.String())
	}
	g := map[string][]string{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		g[f[0]] = f[1:]
		last = f[0] // -deps lists the named package last
	}
	return g, last, sc.Err()
}
