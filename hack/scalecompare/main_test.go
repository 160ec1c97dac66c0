package main

import (
	"strings"
	"testing"
)

// Lines as BenchmarkHubScale writes them with -v (a4959c0 and later).
const beforeLog = `goos: linux
BenchmarkHubScale
    scale_bench_test.go:87: 10 rings: 10 | 27 s | 284 ms | 483 ms | 2.94 | 0.043 | 91 | 9.7 | 3.6 / 3.3 / 3.4 | 0 | 0 | 0.00 | n/a | n/a | 21
    scale_bench_test.go:87: 25 rings: 25 | 31 s | 714 ms | 1595 ms | 7.93 | 0.094 | 97 | 23.4 | 5.6 / 4.5 / 4.9 | 0 | 0 | 24.60 | n/a | n/a | 37
    scale_bench_test.go:96: 
        | rings | all Available | ...
        | 10 | 27 s | 284 ms | 483 ms | 2.94 | 0.043 | 91 | 9.7 | 3.6 / 3.3 / 3.4 | 0 | 0 | 0.00 | n/a | n/a | 21 |
--- FAIL: BenchmarkHubScale
`

const afterLog = `BenchmarkHubScale
    scale_bench_test.go:86: 10 rings: 10 | 18 s | 166 ms | 415 ms | 0.00 | 0.010 | 98 | 1.0 | 4.2 / 3.9 / 3.6 | 0 | 0 | 0.00 | 10 | 0 | 21
    scale_bench_test.go:86: 25 rings: 25 | 15 s | 263 ms | 313 ms | 0.00 | 0.011 | 105 | 1.0 | 5.6 / 5.5 / 4.8 | 0 | 0 | 0.00 | 25 | 0 | 36
    scale_bench_test.go:86: 100 rings: 100 | 103 s | 586 ms | 951 ms | 0.09 | 0.018 | 115 | 1.4 | 12.8 / 12.8 / 12.5 | 0 | 0 | 1.62 | 53 | 3 | 64
PASS
`

func TestParseLog(t *testing.T) {
	rows, err := parseLog(strings.NewReader(beforeLog))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows %v, want 10 and 25 (the final table's lines are not rows)", rows)
	}
	if got := rows[25].cells[colP99]; got != "1595 ms" {
		t.Errorf("25 rings p99 = %q, want 1595 ms", got)
	}
	if got := rows[10].cells[colTCP]; got != "21" {
		t.Errorf("10 rings TCP = %q, want 21 (last cell, no trailing space)", got)
	}
}

func TestParseLogRefusesAnotherColumnCount(t *testing.T) {
	_, err := parseLog(strings.NewReader("    scale_bench_test.go:87: 10 rings: 10 | 27 s | 284 ms\n"))
	if err == nil {
		t.Fatal("a row of 3 cells was accepted")
	}
}

func TestNormalizeStatus(t *testing.T) {
	for _, tc := range []struct {
		rings int
		total bool
		cell  string
		want  string
	}{
		{rings: 25, total: true, cell: "24.80", want: "0.80"}, // 31 members
		{rings: 10, total: true, cell: "0.00", want: "0.00"},
		{rings: 2, total: true, cell: "3.00", want: "0.50"}, // 6 members
		{rings: 25, total: false, cell: "0.77", want: "0.77"},
		{rings: 25, total: true, cell: "n/a", want: "n/a"},
	} {
		cells := make([]string, numCols)
		cells[colStatus] = tc.cell
		got := normalize(row{rings: tc.rings, cells: cells}, tc.total).cells[colStatus]
		if got != tc.want {
			t.Errorf("%d rings, total=%v, %q: got %q, want %q", tc.rings, tc.total, tc.cell, got, tc.want)
		}
	}
}

func TestTable(t *testing.T) {
	before, err := parseLog(strings.NewReader(beforeLog))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseLog(strings.NewReader(afterLog))
	if err != nil {
		t.Fatal(err)
	}
	got := table(before, after, "before", "after")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if want := 2 + len(figures()); len(lines) != want {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), want, got)
	}
	for _, want := range []string{
		"| figure | 10 rings before | 10 rings after | 25 rings before | 25 rings after | 100 rings before | 100 rings after |",
		"| time until all Available | 27 s | 18 s | 31 s | 15 s | — | 103 s |",
		"| member cluster 2 API req/s at rest | 3.3 | 3.9 | 4.5 | 5.5 | — | 12.8 |",
		"| etcd clients held by the hub | n/a | 10 | n/a | 25 | — | 53 |",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	for _, l := range lines {
		if n := strings.Count(l, "|"); n != 8 {
			t.Errorf("line with %d pipes, want 8: %q", n, l)
		}
	}
}
