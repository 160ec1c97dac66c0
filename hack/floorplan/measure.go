package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Plan is what Measure found: the long files and the long functions.
type Plan struct {
	Files []File
	Funcs []Func
}

// File is one file over the limit.
type File struct {
	Path  string
	Lines int
}

// Func is one function or method declaration over the limit; Name is
// "Recv.Name" for a method.
type Func struct {
	Path  string
	Line  int
	Name  string
	Lines int
}

// Measure walks root and returns its files longer than fileLines and its
// function declarations longer than funcLines, longest first. Paths are
// as the walk from root names them. Skipped: *_test.go, zz_* files, a
// directory named test directly under the module root (the end-to-end
// tests), testdata, bin, and directories whose name starts with "." or
// "_".
func Measure(root string, fileLines, funcLines int) (Plan, error) {
	var p Plan
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !measured(d.Name()) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if n := bytes.Count(src, []byte("\n")); n > fileLines {
			p.Files = append(p.Files, File{Path: path, Lines: n})
		}
		funcs, err := longFuncs(fset, path, src, funcLines)
		if err != nil {
			return err
		}
		p.Funcs = append(p.Funcs, funcs...)
		return nil
	})
	if err != nil {
		return Plan{}, fmt.Errorf("walk %s: %w", root, err)
	}
	p.sort()
	return p, nil
}

// skipDir says whether the walk leaves out a directory: what the go tool
// ignores, bin/, and the end-to-end tests (test/ in a module root).
func skipDir(path, name string) bool {
	if name == "testdata" || name == "bin" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	if name == "test" {
		_, err := os.Stat(filepath.Join(filepath.Dir(path), "go.mod"))
		return err == nil
	}
	return false
}

// measured says whether a file counts: Go source, neither a test nor
// generated.
func measured(name string) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !strings.HasPrefix(name, "zz_")
}

// longFuncs parses one file and returns its declarations with a body
// longer than limit lines.
func longFuncs(fset *token.FileSet, path string, src []byte, limit int) ([]Func, error) {
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	var out []Func
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > limit {
			out = append(out, Func{Path: path, Line: start, Name: funcName(fn), Lines: n})
		}
	}
	return out, nil
}

// funcName is the declaration's name, "Recv.Name" for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}

// sort orders both lists longest first, then by path and line.
func (p *Plan) sort() {
	sort.Slice(p.Files, func(i, j int) bool {
		a, b := p.Files[i], p.Files[j]
		if a.Lines != b.Lines {
			return a.Lines > b.Lines
		}
		return a.Path < b.Path
	})
	sort.Slice(p.Funcs, func(i, j int) bool {
		a, b := p.Funcs[i], p.Funcs[j]
		if a.Lines != b.Lines {
			return a.Lines > b.Lines
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Line < b.Line
	})
}
