package clusterstatus

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// renderDistance prints the timing etcd runs with and why, and the
// round-trip matrix between member clusters (rule 15): one row per
// measuring cluster, one column per measured one, each cell median/p99
// in milliseconds and how long ago the hub recorded it.
func renderDistance(p *printer, ec *etcdfedv1.EtcdCluster, now time.Time) {
	st := ec.Status
	if t := st.Timing; t != nil {
		p.f("\nTiming: heartbeat %d ms, election timeout %d ms (%s): %s\n", t.HeartbeatIntervalMillis, t.ElectionTimeoutMillis, t.Source, oneLine(t.Message))
	}
	if len(st.RoundTrips) == 0 || p.err != nil {
		return
	}
	var names []string
	cell := map[[2]string]etcdfedv1.RoundTrip{}
	for _, r := range st.RoundTrips {
		names = append(names, r.From, r.To)
		cell[[2]string{r.From, r.To}] = r
	}
	slices.Sort(names)
	names = slices.Compact(names)
	p.f("\nRound trips (median/p99 ms, recorded ago; from the row's cluster to the column's):\n")
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM \\ TO\t"+strings.Join(names, "\t"))
	for _, from := range names {
		row := []string{from}
		for _, to := range names {
			r, ok := cell[[2]string{from, to}]
			switch {
			case from == to:
				row = append(row, "-")
			case !ok:
				row = append(row, "?")
			default:
				ago := "-"
				if r.ObservedAt != nil {
					ago = age(now, r.ObservedAt.Time)
				}
				row = append(row, fmt.Sprintf("%s/%s (%s)", ms(r.MedianMicros), ms(r.P99Micros), ago))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}

// ms formats microseconds as milliseconds, one decimal below 10 ms.
func ms(us int64) string {
	if us < 10_000 {
		return fmt.Sprintf("%.1f", float64(us)/1000)
	}
	return fmt.Sprintf("%d", (us+500)/1000)
}
