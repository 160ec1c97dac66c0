package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// write creates the files of a small tree under a temporary directory.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, src := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fn is a function declaration of exactly lines lines.
func fn(name string, lines int) string {
	return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
}

func TestMeasure(t *testing.T) {
	long := "package a\n\n" + fn("Long", 6) + fn("Short", 5) +
		"type T struct{}\n\n" + strings.Replace(fn("Method", 7), "func ", "func (t *T) ", 1)
	root := write(t, map[string]string{
		"go.mod":            "module x\n",
		"a/a.go":            long,                       // 2+6+5+2+7 = 22 lines
		"a/small.go":        "package a\n",              // short file, no function
		"a/a_test.go":       long,                       // a test: skipped
		"a/zz_generated.go": long,                       // generated: skipped
		"test/e2e/e2e.go":   long,                       // end-to-end tests: skipped
		"a/test/t.go":       long,                       // a package named test below the root: counted
		"a/testdata/x.go":   long,                       // testdata: skipped
		"bin/tool/x.go":     long,                       // bin: skipped
		"a/.hidden/x.go":    long,                       // hidden: skipped
		"a/notes.txt":       strings.Repeat("x\n", 100), // not Go
	})
	got, err := Measure(root, 20, 5)
	if err != nil {
		t.Fatal(err)
	}
	rel := func(p string) string { r, _ := filepath.Rel(root, p); return r }
	var files []string
	for _, f := range got.Files {
		files = append(files, rel(f.Path)+" "+strconv.Itoa(f.Lines))
	}
	var funcs []string
	for _, f := range got.Funcs {
		funcs = append(funcs, rel(f.Path)+":"+strconv.Itoa(f.Line)+" "+f.Name+" "+strconv.Itoa(f.Lines))
	}
	wantFiles := []string{"a/a.go 22", "a/test/t.go 22"}
	wantFuncs := []string{
		"a/a.go:16 T.Method 7", "a/test/t.go:16 T.Method 7",
		"a/a.go:3 Long 6", "a/test/t.go:3 Long 6",
	}
	if !reflect.DeepEqual(files, wantFiles) {
		t.Errorf("files = %q, want %q", files, wantFiles)
	}
	if !reflect.DeepEqual(funcs, wantFuncs) {
		t.Errorf("funcs = %q, want %q", funcs, wantFuncs)
	}
}

// TestMeasureAtTheLimit: a file or function exactly at the limit is not
// long; one line more is.
func TestMeasureAtTheLimit(t *testing.T) {
	src := "package a\n\n" + fn("F", 10) // 12 lines
	root := write(t, map[string]string{"a.go": src})
	for _, c := range []struct {
		fileLimit, funcLimit, files, funcs int
	}{
		{12, 10, 0, 0},
		{11, 9, 1, 1},
	} {
		got, err := Measure(root, c.fileLimit, c.funcLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Files) != c.files || len(got.Funcs) != c.funcs {
			t.Errorf("limits %d/%d: %d files, %d funcs; want %d, %d", c.fileLimit, c.funcLimit, len(got.Files), len(got.Funcs), c.files, c.funcs)
		}
	}
}

func TestMeasureParseError(t *testing.T) {
	root := write(t, map[string]string{"a.go": "package a\nfunc {"})
	if _, err := Measure(root, 500, 80); err == nil || !strings.Contains(err.Error(), "parse") {
		t.Fatalf("err = %v, want a parse error", err)
	}
}
