package main

import (
	"fmt"
	"slices"
	"strings"
)

// The floors of etcdfed's tree, lowest first. A package's non-test
// imports stay on its floor or go down; a test file may import a fixture
// from any floor (the fixtures live in dev/).
const (
	// FloorBase: what every binary may link: the API types, config/'s
	// embedded packages, pkg/, internal/ and dnsprovider/. They import
	// no component, no CLI and no dev code.
	FloorBase = iota
	// FloorComponents: the hub and the spoke.
	FloorComponents
	// FloorCLI: the etcdfed CLI's commands that speak the hub's
	// contracts (cli/: install, escrow, the support bundle).
	FloorCLI
	// FloorDev: the local environment, drills, the recorded workload,
	// test fixtures (dev/, and a fixture package anywhere by the naming
	// rule of Forbidden), the end-to-end tests and the build tooling.
	FloorDev
	// FloorMain: the binaries (cmd/). A main package links from any floor;
	// which floors a shipped binary reaches is Check's business.
	FloorMain
)

var floorNames = []string{"base", "components", "cli", "dev", "main"}

// Floor returns the floor of one of etcdfed's packages (rel is its path
// below the module), or -1 for a folder no floor names: a new top-level
// folder must be given one here.
func Floor(rel string) int {
	if isFixture(rel) {
		return FloorDev
	}
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "api", "config", "pkg", "internal", "dnsprovider":
		return FloorBase
	case "hub", "spoke":
		return FloorComponents
	case "cli":
		return FloorCLI
	case "dev", "test", "hack":
		return FloorDev
	case "cmd":
		return FloorMain
	}
	return -1
}

// Upward is one import from a lower floor to a higher one.
type Upward struct {
	Package, Import string
	// From and To name the floors, or say that the folder has none.
	From, To string
}

func (u Upward) String() string {
	return fmt.Sprintf("%s (%s) imports %s (%s)", u.Package, u.From, u.Import, u.To)
}

// CheckLayers returns every import in g (each etcdfed package's non-test
// imports, full import paths) that runs up a floor or from or to a folder
// with no floor, sorted.
func CheckLayers(g map[string][]string) []Upward {
	var out []Upward
	name := func(f int) string {
		if f < 0 {
			return "no floor: add its folder to Floor"
		}
		return floorNames[f]
	}
	for p, imps := range g {
		rel, ok := strings.CutPrefix(p, Module+"/")
		if !ok {
			continue
		}
		from := Floor(rel)
		for _, i := range imps {
			irel, ok := strings.CutPrefix(i, Module+"/")
			if !ok {
				continue
			}
			to := Floor(irel)
			if from < 0 || to < 0 || to > from {
				out = append(out, Upward{Package: rel, Import: irel, From: name(from), To: name(to)})
			}
		}
	}
	slices.SortFunc(out, func(a, b Upward) int {
		return strings.Compare(a.Package+" "+a.Import, b.Package+" "+b.Import)
	})
	return out
}
