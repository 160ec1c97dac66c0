// Command scalecompare merges two runs of BenchmarkHubScale (test/multicluster)
// into one markdown table: a row per figure, and for each ring count a
// "before" and an "after" column side by side. hack/bench-scale-compare.sh
// runs the benchmark on a commit before the hub's scale fixes and on this
// tree, one after the other on the same machine, and calls it with the two
// `go test -v` logs.
//
// Rows are read from the benchmark's per-size log line ("N rings: c1 | c2
// | ..."), which every version of the benchmark writes as soon as a size is
// measured: a side that stopped at a size the machine could not hold still
// reports the sizes before it.
//
// The first version of the benchmark (a4959c0) reported EtcdMember status
// patches per minute over all members; later ones per member. With
// -before-status=total (or -after-status=total) that side's figure is
// divided by the ring set's member count (the first three rings have three
// members, the others one) so that both sides read per member.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The benchmark's columns, in its order.
const (
	colRings = iota
	colAvailable
	colP50
	colP99
	colReconciles
	colCPU
	colRSS
	colHubAPI
	colMemberAPI
	colHubWrites
	colMemberWrites
	colStatus
	colEtcdClients
	colEtcdDials
	colTCP
	numCols
)

// memberClusters is the local environment's member cluster count: the
// member API column holds one figure per member cluster.
const memberClusters = 3

// rowLine matches the benchmark's per-size log line, e.g.
// "    scale_bench_test.go:87: 10 rings: 10 | 27 s | ...".
var rowLine = regexp.MustCompile(`^\s*scale_bench_test\.go:\d+: (\d+) rings: (.*)$`)

// row is one ring count's cells as the benchmark wrote them.
type row struct {
	rings int
	cells []string
}

// parseLog returns the rows of a benchmark log by ring count (a later line
// for the same count wins).
func parseLog(r io.Reader) (map[int]row, error) {
	out := map[int]row{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := rowLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		cells := strings.Split(m[2], " | ")
		if len(cells) != numCols {
			return nil, fmt.Errorf("%d rings: %d cells, want %d: %q", n, len(cells), numCols, m[2])
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		out[n] = row{rings: n, cells: cells}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	return out, nil
}

// members is the etcd member count of the benchmark's first n rings.
func members(n int) int { return n + 2*min(n, 3) }

// statusPerMember turns a total EtcdMember status rate per minute into one
// per member.
func statusPerMember(cell string, rings int) string {
	v, err := strconv.ParseFloat(cell, 64)
	if err != nil {
		return cell
	}
	return fmt.Sprintf("%.2f", v/float64(members(rings)))
}

// normalize makes a side's row read like the current benchmark's.
func normalize(r row, statusTotal bool) row {
	cells := slices.Clone(r.cells)
	if statusTotal {
		cells[colStatus] = statusPerMember(cells[colStatus], r.rings)
	}
	return row{rings: r.rings, cells: cells}
}

// figure is one row of the combined table: a name and how to read it from
// a benchmark row.
type figure struct {
	name string
	cell func(row) string
}

func col(i int) func(row) string { return func(r row) string { return r.cells[i] } }

// memberAPI reads member cluster k's figure from the "a / b / c" cell.
func memberAPI(k int) func(row) string {
	return func(r row) string {
		parts := strings.Split(r.cells[colMemberAPI], " / ")
		if k >= len(parts) {
			return "n/a"
		}
		return strings.TrimSpace(parts[k])
	}
}

func figures() []figure {
	fs := []figure{
		{"time until all Available", col(colAvailable)},
		{"spec change → EtcdMember p50", col(colP50)},
		{"spec change → EtcdMember p99", col(colP99)},
		{"hub reconciles/s at rest", col(colReconciles)},
		{"hub CPU s/s at rest", col(colCPU)},
		{"hub RSS MiB", col(colRSS)},
		{"hub cluster API req/s at rest", col(colHubAPI)},
	}
	for k := range memberClusters {
		fs = append(fs, figure{fmt.Sprintf("member cluster %d API req/s at rest", k+1), memberAPI(k)})
	}
	return append(fs,
		figure{"etcdfed.dev writes to the hub cluster in the window", col(colHubWrites)},
		figure{"etcdfed.dev writes by the hub to member clusters in the window", col(colMemberWrites)},
		figure{"EtcdMember status patches /member/min (spokes)", col(colStatus)},
		figure{"etcd clients held by the hub", col(colEtcdClients)},
		figure{"etcd dials in the window", col(colEtcdDials)},
		figure{"hub TCP connections", col(colTCP)},
	)
}

// notRun marks a ring count one side did not measure.
const notRun = "—"

// table renders the combined table for the ring counts either side has.
func table(before, after map[int]row, beforeName, afterName string) string {
	var sizes []int
	for n := range before {
		sizes = append(sizes, n)
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	var sb strings.Builder
	sb.WriteString("| figure |")
	for _, n := range sizes {
		fmt.Fprintf(&sb, " %d rings %s | %d rings %s |", n, beforeName, n, afterName)
	}
	sb.WriteString("\n|---|")
	for range sizes {
		sb.WriteString("---|---|")
	}
	sb.WriteString("\n")
	for _, f := range figures() {
		sb.WriteString("| " + f.name + " |")
		for _, n := range sizes {
			for _, side := range []map[int]row{before, after} {
				v := notRun
				if r, ok := side[n]; ok {
					v = f.cell(r)
				}
				sb.WriteString(" " + v + " |")
			}
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func readSide(path string, statusTotal bool) (map[int]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := parseLog(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for n, r := range rows {
		rows[n] = normalize(r, statusTotal)
	}
	return rows, nil
}

func statusMode(v string) (bool, error) {
	switch v {
	case "total":
		return true, nil
	case "per-member":
		return false, nil
	}
	return false, fmt.Errorf("status mode %q: want total or per-member", v)
}

func run() error {
	beforeLog := flag.String("before", "", "go test -v log of the before side")
	afterLog := flag.String("after", "", "go test -v log of the after side")
	beforeName := flag.String("before-name", "before", "column label of the before side")
	afterName := flag.String("after-name", "after", "column label of the after side")
	beforeStatus := flag.String("before-status", "per-member", "what the before side's EtcdMember status column counts: total or per-member")
	afterStatus := flag.String("after-status", "per-member", "what the after side's EtcdMember status column counts: total or per-member")
	flag.Parse()
	if *beforeLog == "" || *afterLog == "" {
		return errors.New("want -before LOG and -after LOG")
	}
	bt, err := statusMode(*beforeStatus)
	if err != nil {
		return err
	}
	at, err := statusMode(*afterStatus)
	if err != nil {
		return err
	}
	before, err := readSide(*beforeLog, bt)
	if err != nil {
		return err
	}
	after, err := readSide(*afterLog, at)
	if err != nil {
		return err
	}
	if len(before) == 0 && len(after) == 0 {
		return errors.New("neither log has a measured ring count")
	}
	fmt.Print(table(before, after, *beforeName, *afterName))
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scalecompare:", err)
		os.Exit(1)
	}
}
