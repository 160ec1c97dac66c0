// Command testsummary reads `go test -json` on stdin, passes the human
// output through, and ends with a count of passed, failed and skipped tests
// and the reason each skipped test gave. It exits non-zero when any test or
// package failed, so `make test` cannot hide a failure or a silent skip.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	var passed, failed, skipped int
	var failures []string
	skipReasons := map[string]string{}
	lastOutput := map[string][]string{}
	pkgFailed := map[string]bool{}

	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			fmt.Println(string(line)) // build errors are not JSON
			continue
		}
		key := e.Package + "." + e.Test
		switch e.Action {
		case "output":
			fmt.Print(e.Output)
			if e.Test != "" {
				out := append(lastOutput[key], strings.TrimSpace(e.Output))
				if len(out) > 3 {
					out = out[len(out)-3:]
				}
				lastOutput[key] = out
			}
		case "pass":
			if e.Test != "" {
				passed++
			}
		case "fail":
			if e.Test != "" {
				failed++
				failures = append(failures, key)
			} else {
				pkgFailed[e.Package] = true
			}
		case "skip":
			if e.Test != "" {
				skipped++
				skipReasons[key] = strings.Join(lastOutput[key], " ")
			}
		}
	}
	fmt.Printf("\n==> tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	keys := make([]string, 0, len(skipReasons))
	for k := range skipReasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("    skipped %s: %s\n", k, skipReasons[k])
	}
	for _, f := range failures {
		fmt.Printf("    FAILED %s\n", f)
	}
	pkgs := make([]string, 0, len(pkgFailed))
	for p := range pkgFailed {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Printf("    FAILED package %s\n", p)
	}
	if failed > 0 || len(pkgFailed) > 0 {
		os.Exit(1)
	}
}
