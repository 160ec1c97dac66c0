package etcdstatus

import (
	"math"
	"strconv"
	"strings"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// The disk view: how long a member's etcd takes to sync its write-ahead
// log, from the same metrics read as the peer view (no new request).
//
// A leader sends its heartbeats from the loop that also waits for its
// syncs, so a sync that outlasts the election timeout makes the followers
// campaign although every link is up: on a disk that stalls, the disk
// sets how short a ring's timing may be, not the distance. etcd keeps the
// syncs in a cumulative histogram (etcd_disk_wal_fsync_duration_seconds,
// buckets of 1 ms doubling to 8.192 s); the spoke keeps the member's
// readings of the last DiskWindow and reports the tail of the syncs
// between the oldest and the newest.

// walFsyncBucket is the histogram's bucket series, with the label block's
// opening brace.
const walFsyncBucket = "etcd_disk_wal_fsync_duration_seconds_bucket{"

// DiskWindow is how far back a member's disk view reaches.
const DiskWindow = etcdfedv1.DiskWindowSeconds * time.Second

// maxDiskReadings bounds the readings kept per member (a read every few
// seconds for DiskWindow needs far fewer: older ones are dropped first).
const maxDiskReadings = 256

// beyondBuckets is what a sync slower than etcd's largest bucket counts
// as, in milliseconds (twice that bucket).
const beyondBuckets = 16384

// Histogram is a cumulative histogram as Prometheus exposes it: Bounds
// ascending in seconds (the last may be +Inf), Counts the syncs at or
// below each.
type Histogram struct {
	Bounds []float64
	Counts []float64
}

// total is the histogram's count (its +Inf bucket, or its largest).
func (h Histogram) total() float64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// minus returns h - base bucket by bucket, or false when the two do not
// have the same buckets or a count went down (the etcd restarted).
func (h Histogram) minus(base Histogram) (Histogram, bool) {
	if len(h.Bounds) != len(base.Bounds) {
		return Histogram{}, false
	}
	d := Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts))}
	for i := range h.Counts {
		if h.Bounds[i] != base.Bounds[i] || h.Counts[i] < base.Counts[i] {
			return Histogram{}, false
		}
		d.Counts[i] = h.Counts[i] - base.Counts[i]
	}
	return d, true
}

// Over returns how many of the histogram's syncs took longer than bound
// (seconds, one of its bucket bounds) and how many it holds; false when
// it has no such bucket.
func (h Histogram) Over(bound float64) (over, total float64, ok bool) {
	for i, b := range h.Bounds {
		if b == bound {
			return h.total() - h.Counts[i], h.total(), true
		}
	}
	return 0, 0, false
}

// quantileMillis is the upper bound, in whole milliseconds, of the first
// bucket holding at least q of the histogram's count.
func (h Histogram) quantileMillis(q float64) int64 {
	want := q * h.total()
	for i, c := range h.Counts {
		if c >= want {
			if math.IsInf(h.Bounds[i], 1) {
				return beyondBuckets
			}
			return int64(math.Ceil(h.Bounds[i]*1000 - 1e-9))
		}
	}
	return beyondBuckets
}

// parseBucket adds one bucket line of the histogram (the text after the
// series name's brace) to h; lines that do not parse are skipped.
func (h *Histogram) parseBucket(rest string) {
	labels, value, ok := strings.Cut(rest, "} ")
	if !ok {
		return
	}
	le := label(labels, "le")
	fields := strings.Fields(value)
	if le == "" || len(fields) == 0 {
		return
	}
	bound, err := strconv.ParseFloat(le, 64)
	if err != nil {
		return
	}
	count, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return
	}
	// etcd writes the buckets in ascending order; keep them so.
	i := len(h.Bounds)
	for i > 0 && h.Bounds[i-1] > bound {
		i--
	}
	h.Bounds = append(h.Bounds[:i], append([]float64{bound}, h.Bounds[i:]...)...)
	h.Counts = append(h.Counts[:i], append([]float64{count}, h.Counts[i:]...)...)
}

// diskReading is one reading of a member's histogram and late heartbeat
// counter.
type diskReading struct {
	at   time.Time
	h    Histogram
	late float64
}

// DiskWarmup is how long after a member's etcd (re)started, or after the
// spoke began to read it, its syncs are left out of its window. A
// starting etcd's first syncs (opening its log, catching up with the
// leader) are slower than a running one's: counted, they would raise a
// timingFloor Disk after every roll, and the roll that raise asks for
// would do the same again ten minutes after the floor came down.
const DiskWarmup = time.Minute

// DiskReadings keeps a member's readings of the last DiskWindow.
type DiskReadings struct {
	// Warmup is DiskWarmup when zero.
	Warmup time.Duration

	readings []diskReading
	since    time.Time // the window's start: a restart or the first reading
}

// Add records a reading taken at now (m's WAL sync histogram and late
// heartbeats) and returns the view of the window: the syncs and late
// heartbeats between the oldest reading kept and this one. A count that
// went down (the member's etcd restarted) starts the window again. Nil
// during the warmup; once past it, a view with no sync in it says so
// (all zero but the window).
func (w *DiskReadings) Add(now time.Time, m Metrics) *etcdfedv1.MemberDiskView {
	h := m.WALFsync
	if len(h.Counts) == 0 {
		return nil
	}
	if n := len(w.readings); n == 0 {
		w.since = now
	} else if _, ok := h.minus(w.readings[n-1].h); !ok || m.LateHeartbeats < w.readings[n-1].late {
		// A restart: its counts begin again.
		w.readings, w.since = w.readings[:0], now
	}
	w.readings = append(w.readings, diskReading{at: now, h: h, late: m.LateHeartbeats})
	warmup := w.Warmup
	if warmup == 0 {
		warmup = DiskWarmup
	}
	if now.Sub(w.since) < warmup {
		// The window's base moves with the warmup.
		w.readings = w.readings[len(w.readings)-1:]
		return nil
	}
	// Drop what is older than the window, keeping the newest reading at
	// or before its start as the base.
	cut := 0
	for cut+1 < len(w.readings) && !w.readings[cut+1].at.After(now.Add(-DiskWindow)) {
		cut++
	}
	if over := len(w.readings) - maxDiskReadings; over > cut {
		cut = over
	}
	w.readings = w.readings[cut:]
	base := w.readings[0]
	d, ok := h.minus(base.h)
	if !ok {
		return nil
	}
	v := &etcdfedv1.MemberDiskView{
		Syncs:          int64(d.total()),
		WindowSeconds:  int32(min(now.Sub(base.at), 24*time.Hour) / time.Second),
		LateHeartbeats: int64(m.LateHeartbeats - base.late),
	}
	if v.Syncs > 0 {
		v.P99Millis, v.MaxMillis = d.quantileMillis(0.99), d.quantileMillis(1)
	}
	return v
}
