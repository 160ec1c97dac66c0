package reports

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPackageDocNamesEveryCheckedField keeps the package doc's list of
// what the hub carries out of spokes' reports equal to what this package
// checks: every status field named in a rejection ("status.roundTrips")
// is named in the package doc, in words ("round trips"). The list went
// stale once: round trips and unschedulable zones were checked and
// carried, and the doc did not say so.
func TestPackageDocNamesEveryCheckedField(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "reports.go", nil, parser.ParseComments)
	if err != nil || f.Doc == nil {
		t.Fatalf("read the package doc: %v", err)
	}
	doc := strings.Join(strings.Fields(strings.ToLower(f.Doc.Text())), " ")
	fields := map[string]bool{}
	field := regexp.MustCompile(`^status\.([A-Za-z]+)`)
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, _ := strconv.Unquote(lit.Value)
			if m := field.FindStringSubmatch(v); m != nil {
				fields[m[1]] = true
			}
		}
		return true
	})
	if len(fields) < 8 {
		t.Fatalf("found %d checked fields in reports.go (%v): the test no longer reads them", len(fields), fields)
	}
	for name := range fields {
		if words := inWords(name); !strings.Contains(doc, words) {
			t.Errorf("the package doc does not name the checked field status.%s (as %q)", name, words)
		}
	}
}

// inWords spells a JSON field name as the doc says it: dnsAddresses is
// "dns addresses", peerURL "peer url", roundTrips "round trips".
func inWords(name string) string {
	var b strings.Builder
	for i, r := range name {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 && (name[i-1] < 'A' || name[i-1] > 'Z') {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}
