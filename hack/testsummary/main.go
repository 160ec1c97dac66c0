// Command testsummary reads `go test -json` on stdin, passes the human
// output through, and ends with a count of passed, failed and skipped tests
// and the reason each skipped test gave, then each failed test's last
// lines of output (CI keeps the tail of a long log, so a failure's reason
// is where it is read). It exits non-zero when any test or package failed,
// so `make test` cannot hide a failure or a silent skip.
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
	tail := map[string][]string{} // a test's (or package's) last failTail lines
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
			t := append(tail[key], strings.TrimRight(e.Output, "\n"))
			if len(t) > failTail {
				t = t[len(t)-failTail:]
			}
			tail[key] = t
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
	for _, f := range failures {
		if isParentOf(f, failures) {
			continue // its failed subtest's lines say why
		}
		fmt.Printf("\n==> %s failed; its last lines:\n", f)
		for _, l := range tail[f] {
			fmt.Printf("    | %s\n", l)
		}
	}
	pkgs := make([]string, 0, len(pkgFailed))
	for p := range pkgFailed {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Printf("    FAILED package %s\n", p)
	}
	for _, p := range pkgs {
		if t := tail[p+"."]; len(t) > 0 && !hasFailedTest(p, failures) {
			// A package that failed without a failed test: a panic, a
			// timeout or a build error says why in the package's output.
			fmt.Printf("\n==> package %s failed; its last lines:\n", p)
			for _, l := range t {
				fmt.Printf("    | %s\n", l)
			}
		}
	}
	if failed > 0 || len(pkgFailed) > 0 {
		os.Exit(1)
	}
}

// failTail is how many lines of a failed test's output the summary repeats.
const failTail = 25

// isParentOf says whether some other failure is a subtest of f.
func isParentOf(f string, failures []string) bool {
	for _, g := range failures {
		if strings.HasPrefix(g, f+"/") {
			return true
		}
	}
	return false
}

// hasFailedTest says whether a failed test belongs to package p.
func hasFailedTest(p string, failures []string) bool {
	for _, f := range failures {
		if strings.HasPrefix(f, p+".") {
			return true
		}
	}
	return false
}
