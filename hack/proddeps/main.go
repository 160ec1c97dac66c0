// Command proddeps fails when a production binary (hub, spoke, the
// etcdfed-init helper) links test or dev code: the standard library's
// testing packages, envtest, etcdfed's test fixtures or its local
// environment. `make verify` runs it. For every forbidden package it prints
// the chain of imports that brings it in, so the fix is plain.
//
// It reads the import graph from `go list -deps` with the images' build
// settings (CGO_ENABLED=0, linux).
//
//	go run ./hack/proddeps                 # the production binaries
//	go run ./hack/proddeps ./cmd/spoke     # only these
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
	if len(pkgs) == 0 {
		pkgs = Production
	}
	bad := 0
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
		os.Exit(1)
	}
	fmt.Printf("proddeps: %s link no test or dev code\n", strings.Join(pkgs, ", "))
}

// importGraph runs go list -deps on pkg and returns each package's imports
// and pkg's own import path.
func importGraph(pkg string) (map[string][]string, string, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", pkg)
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
