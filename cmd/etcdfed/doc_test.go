package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestPackageDocNamesEveryCommand keeps the package doc a true map of the
// CLI: every top-level command registered with root is named in it (in
// backquotes), and it names no command that is gone. A package doc listing
// commands went stale once already (it named four of fourteen).
func TestPackageDocNamesEveryCommand(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatalf("parse main.go: %v", err)
	}
	if f.Doc == nil {
		t.Fatal("main.go has no package doc")
	}
	doc := f.Doc.Text()
	registered := map[string]bool{}
	for _, c := range root.Commands() {
		name := c.Name()
		if name == "help" || name == "completion" {
			continue // cobra's own
		}
		registered[name] = true
		if !strings.Contains(doc, "`"+name) {
			t.Errorf("the package doc does not name the command %q (%s)", name, c.Short)
		}
	}
	// Inside backquotes the first word of each quoted span is a command
	// when it is a lower-case word; it must still exist.
	spans := strings.Split(doc, "`")
	for i := 1; i < len(spans); i += 2 {
		words := strings.Fields(spans[i])
		if len(words) > 0 && looksLikeCommand(words[0]) && !registered[words[0]] {
			t.Errorf("the package doc names %q, which is no command of root", words[0])
		}
	}
}

// looksLikeCommand reports whether a backquoted word is meant as a
// top-level command: lower-case letters and dashes only.
func looksLikeCommand(w string) bool {
	for _, r := range w {
		if (r < 'a' || r > 'z') && r != '-' {
			return false
		}
	}
	return w != ""
}
