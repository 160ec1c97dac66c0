package v1alpha1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every event the hub and the spoke record takes its reason from a
// constant (events.go here, the condition reasons, spoke/member's
// reasons.go), never from a string literal at the call: alerts and tests
// match reasons, and a reason spelled at a call site drifts. The check is
// on the source: in hub/ and spoke/ (tests aside),
//   - the reason argument of every call to Eventf (the EventRecorder) and to
//     every function whose name says event and that has a parameter named
//     reason holds no string literal and no concatenation;
//   - so does the reason field of every event struct literal (a type named
//     ...Event with a field named reason);
//   - no string literal anywhere spells an event reason of events.go.
func TestEventReasonsAreConstants(t *testing.T) {
	reasons := eventReasons(t)
	if len(reasons) < 40 {
		t.Fatalf("read %d event reasons from events.go; expected them all", len(reasons))
	}
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{} // by directory
	for _, root := range []string{"../../hub", "../../spoke"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages under hub/ and spoke/", len(pkgs))
	}

	calls, sites := 0, 0
	for _, files := range pkgs {
		// The package's event functions: name -> index of "reason".
		reasonArg := map[string]int{"Eventf": 3}
		// Its event struct types: name -> index of the reason field.
		reasonField := map[string]int{}
		for _, f := range files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if strings.Contains(strings.ToLower(d.Name.Name), "event") {
						if i := paramIndex(d.Type.Params, "reason"); i >= 0 {
							reasonArg[d.Name.Name] = i
						}
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						ts, ok := spec.(*ast.TypeSpec)
						if !ok || !strings.HasSuffix(strings.ToLower(ts.Name.Name), "event") {
							continue
						}
						if st, ok := ts.Type.(*ast.StructType); ok {
							if i := paramIndex(st.Fields, "reason"); i >= 0 {
								reasonField[ts.Name.Name] = i
							}
						}
					}
				}
			}
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						name = fn.Name
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					}
					if i, ok := reasonArg[name]; ok && i < len(n.Args) {
						calls++
						if bad := literalIn(n.Args[i]); bad != "" {
							t.Errorf("%s: %s(...) takes its reason from %s, not a constant", fset.Position(n.Pos()), name, bad)
						}
					}
				case *ast.CompositeLit:
					id, ok := n.Type.(*ast.Ident)
					if !ok {
						return true
					}
					i, ok := reasonField[id.Name]
					if !ok {
						return true
					}
					for j, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "reason" {
								continue
							}
							e = kv.Value
						} else if j != i {
							continue
						}
						sites++
						if bad := literalIn(e); bad != "" {
							t.Errorf("%s: %s{} takes its reason from %s, not a constant", fset.Position(e.Pos()), id.Name, bad)
						}
					}
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						if v, err := strconv.Unquote(n.Value); err == nil && reasons[v] != "" {
							t.Errorf("%s: the literal %s spells v1alpha1.%s", fset.Position(n.Pos()), n.Value, reasons[v])
						}
					}
				}
				return true
			})
		}
	}
	// The check saw the calls it is about.
	if calls < 40 || sites < 5 {
		t.Errorf("checked %d event calls and %d event literals: the walk misses them", calls, sites)
	}
}

// eventReasons reads the event reasons events.go defines with a string
// literal: value -> constant name.
func eventReasons(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		d, ok := decl.(*ast.GenDecl)
		if !ok || d.Tok != token.CONST {
			continue
		}
		for _, spec := range d.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[v] = name.Name
					}
				}
			}
		}
	}
	return out
}

// paramIndex is the position of the parameter (or field) named name.
func paramIndex(fl *ast.FieldList, name string) int {
	i := 0
	for _, f := range fl.List {
		if len(f.Names) == 0 {
			i++
			continue
		}
		for _, n := range f.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

// literalIn describes the string literal or concatenation in e, "" when
// there is none.
func literalIn(e ast.Expr) string {
	bad := ""
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind == token.STRING && bad == "" {
				bad = "the literal " + n.Value
			}
		case *ast.BinaryExpr:
			if n.Op == token.ADD && bad == "" {
				bad = "a concatenation"
			}
		}
		return bad == ""
	})
	return bad
}
