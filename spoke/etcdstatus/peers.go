package etcdstatus

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// The peer view: which raft peers a member's etcd holds a connection to.
//
// It is one of the hub's two witnesses of a failed zone (the other is the
// zone's node Leases). It must not depend on anything the first one
// depends on (the zone's apiserver path, its kubelets), nor on the hub's
// own path to the zone: etcd's raft transport (rafthttp) keeps a stream to
// every peer and says itself whether it is up, as the gauge
// etcd_network_active_peers{Local=<own ID>,Remote=<peer ID>} (1 while the
// peer is active, 0 once its streams and pipeline failed: a peer whose
// process died is dropped at once, one cut off by the network within the
// peer connection's read timeout of 5s). etcd serves its metrics on the
// client URL, which the spoke already reads over the member's own client
// certificate, so no new port, credential or sidecar is needed, and the
// view is the members' own, from inside each member cluster.

// peerMetric is the gauge's name, with the label block's opening brace.
const peerMetric = "etcd_network_active_peers{"

// lateHeartbeatsMetric is the counter of heartbeats a leader sent late
// (more than twice the heartbeat interval after the last), with the
// space before its value.
const lateHeartbeatsMetric = "etcd_server_heartbeat_send_failures_total "

// maxMetricsBytes bounds what is read of /metrics (a few hundred kB on a
// busy member; the gauge comes early, after the etcd_ debugging series).
const maxMetricsBytes = 8 << 20

// readMetrics reads the member's /metrics: its peer view, only the series
// whose Local label is self (the member's ID in hex), and its WAL sync
// histogram.
func readMetrics(ctx context.Context, c *http.Client, endpoint, self string) (Metrics, error) {
	if c == nil || self == "" {
		return Metrics{}, fmt.Errorf("no metrics client or member ID")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/metrics", nil)
	if err != nil {
		return Metrics{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return Metrics{}, fmt.Errorf("read metrics of %s: %w", endpoint, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetricsBytes))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return Metrics{}, fmt.Errorf("read metrics of %s: %s", endpoint, resp.Status)
	}
	return ParseMetrics(io.LimitReader(resp.Body, maxMetricsBytes), self)
}

// Metrics is what the spoke reads of a member's metrics.
type Metrics struct {
	// Peers is the member's peer view.
	Peers *etcdfedv1.MemberPeerView
	// WALFsync is etcd_disk_wal_fsync_duration_seconds; empty when the
	// member exposes none.
	WALFsync Histogram
	// LateHeartbeats is etcd_server_heartbeat_send_failures_total (0 when
	// the member exposes none).
	LateHeartbeats float64
}

// ParsePeers extracts the peer view of member self (hex ID) from etcd's
// metrics in the Prometheus text format. IDs are sorted; a peer listed
// more than once (never, from etcd) counts once, as active when any series
// says so.
func ParsePeers(r io.Reader, self string) (*etcdfedv1.MemberPeerView, error) {
	m, err := ParseMetrics(r, self)
	return m.Peers, err
}

// ParseMetrics extracts the peer view of member self (as ParsePeers) and
// the WAL sync histogram from etcd's metrics in the Prometheus text
// format, in one pass.
func ParseMetrics(r io.Reader, self string) (Metrics, error) {
	var out Metrics
	active, lost := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, walFsyncBucket); ok {
			out.WALFsync.parseBucket(rest)
			continue
		}
		if rest, ok := strings.CutPrefix(line, lateHeartbeatsMetric); ok {
			if fields := strings.Fields(rest); len(fields) > 0 {
				if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
					out.LateHeartbeats = v
				}
			}
			continue
		}
		if !strings.HasPrefix(line, peerMetric) {
			continue
		}
		labels, value, ok := strings.Cut(line[len(peerMetric):], "} ")
		if !ok {
			continue
		}
		local, remote := label(labels, "Local"), label(labels, "Remote")
		if local != self || remote == "" || remote == self {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		if v > 0 {
			active[remote] = true
		} else {
			lost[remote] = true
		}
	}
	if err := sc.Err(); err != nil {
		return Metrics{}, fmt.Errorf("parse metrics: %w", err)
	}
	view := &etcdfedv1.MemberPeerView{}
	for id := range active {
		view.Active = append(view.Active, id)
	}
	for id := range lost {
		if !active[id] {
			view.Lost = append(view.Lost, id)
		}
	}
	slices.Sort(view.Active)
	slices.Sort(view.Lost)
	// The API bounds both lists (a ring has at most 9 members, one more
	// while a member is replaced or moved).
	const maxPeers = 16
	view.Active, view.Lost = view.Active[:min(len(view.Active), maxPeers)], view.Lost[:min(len(view.Lost), maxPeers)]
	out.Peers = view
	return out, nil
}

// label returns the value of name in a Prometheus label block
// (a="x",b="y"); etcd's IDs need no unescaping.
func label(block, name string) string {
	for _, kv := range strings.Split(block, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == name {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return ""
}
