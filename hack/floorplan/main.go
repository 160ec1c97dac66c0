// Command floorplan counts the long files and long functions of etcdfed's
// source, the two size measures of docs/measurements/floor-plan.md, and
// lists them longest first, so a before and after is one command each.
//
// What it reads: the .go files under the given directories (default: the
// whole tree), except test files (*_test.go), generated files (zz_*), the
// end-to-end tests (the top-level test/ directory) and directories Go
// itself ignores (testdata, names starting with "." or "_") and bin/.
//
//   - a long file has more lines than -file-lines (500), counted as wc -l
//     does;
//
//   - a long function is a function or method declaration longer than
//     -func-lines (80), from the line of its func keyword to the line of
//     its closing brace (function literals count toward the declaration
//     holding them).
//
//     go run ./hack/floorplan            # the whole tree
//     go run ./hack/floorplan hub dev    # only these directories
//     go run ./hack/floorplan -counts    # the two counts only
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	fileLines := flag.Int("file-lines", 500, "a file is long above this many lines")
	funcLines := flag.Int("func-lines", 80, "a function is long above this many lines")
	countsOnly := flag.Bool("counts", false, "print the two counts only, not the lists")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var all Plan
	for _, d := range dirs {
		p, err := Measure(d, *fileLines, *funcLines)
		if err != nil {
			fmt.Fprintf(os.Stderr, "floorplan: %v\n", err)
			os.Exit(2)
		}
		all.Files = append(all.Files, p.Files...)
		all.Funcs = append(all.Funcs, p.Funcs...)
	}
	all.sort()
	fmt.Printf("files over %d lines: %d\n", *fileLines, len(all.Files))
	if !*countsOnly {
		for _, f := range all.Files {
			fmt.Printf("  %5d %s\n", f.Lines, f.Path)
		}
	}
	fmt.Printf("functions over %d lines: %d\n", *funcLines, len(all.Funcs))
	if !*countsOnly {
		for _, f := range all.Funcs {
			fmt.Printf("  %5d %s:%d %s\n", f.Lines, f.Path, f.Line, f.Name)
		}
	}
}
