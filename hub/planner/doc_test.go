package planner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestPackageDocNamesEveryOperation keeps the package doc's list of
// operations equal to the API's: every OperationType constant of
// api/v1alpha1 is named in it as a word. The list went stale once (Move
// and Retire were missing), as lists in package docs do.
func TestPackageDocNamesEveryOperation(t *testing.T) {
	fset := token.NewFileSet()
	doc, err := parser.ParseFile(fset, "doc.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil || doc.Doc == nil {
		t.Fatalf("read the package doc: %v", err)
	}
	text := doc.Doc.Text()
	files, err := filepath.Glob("../../api/v1alpha1/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "OperationType" {
					continue
				}
				for _, val := range v.Values {
					if lit, ok := val.(*ast.BasicLit); ok {
						op, _ := strconv.Unquote(lit.Value)
						ops = append(ops, op)
					}
				}
			}
		}
	}
	if len(ops) < 10 {
		t.Fatalf("found %d operation types in api/v1alpha1 (%v): the test no longer reads them", len(ops), ops)
	}
	for _, op := range ops {
		if !regexp.MustCompile(`\b` + op + `\b`).MatchString(text) {
			t.Errorf("the package doc does not name the operation %s", op)
		}
	}
}
