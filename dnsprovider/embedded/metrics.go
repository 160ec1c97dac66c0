package embedded

import (
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// stats counts one transport's (or one UDP socket's) answers. Each UDP
// socket has its own so that the serving goroutines do not share cache
// lines.
type stats struct {
	rcode   [24]atomic.Uint64
	dropped atomic.Uint64
	// rrlDropped and rrlSlipped count UDP responses the rate limiter
	// dropped or sent truncated (their rcode was counted as answered).
	rrlDropped, rrlSlipped atomic.Uint64
	_                      [64]byte
}

func (st *stats) response(rcode int) {
	if rcode < 0 || rcode >= len(st.rcode) {
		rcode = len(st.rcode) - 1
	}
	st.rcode[rcode].Add(1)
}

func (st *stats) drop() { st.dropped.Add(1) }

type metrics struct {
	udp         []*stats
	tcp         *stats
	zones       atomic.Int64
	zoneChanges atomic.Uint64
}

func newMetrics(udpSockets int) *metrics {
	m := &metrics{tcp: &stats{}}
	for range udpSockets {
		m.udp = append(m.udp, &stats{})
	}
	return m
}

func (m *metrics) zoneChange(zones int) {
	m.zones.Store(int64(zones))
	m.zoneChanges.Add(1)
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	// Responses counts answers sent by transport ("udp", "tcp") and
	// response code name ("NOERROR", "NXDOMAIN", ...).
	Responses map[string]map[string]uint64
	// Dropped counts requests left unanswered (too short for a header,
	// or not a request) by transport.
	Dropped     map[string]uint64
	Zones       int
	ZoneChanges uint64
	// RRLDropped and RRLSlipped count UDP responses the rate limiter
	// dropped, and sent truncated instead (RRLConfig).
	RRLDropped, RRLSlipped uint64
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	out := Stats{
		Responses:   map[string]map[string]uint64{"udp": {}, "tcp": {}},
		Dropped:     map[string]uint64{},
		Zones:       int(s.metrics.zones.Load()),
		ZoneChanges: s.metrics.zoneChanges.Load(),
	}
	add := func(proto string, st *stats) {
		for rc := range st.rcode {
			if v := st.rcode[rc].Load(); v > 0 {
				out.Responses[proto][rcodeName(rc)] += v
			}
		}
		out.Dropped[proto] += st.dropped.Load()
		out.RRLDropped += st.rrlDropped.Load()
		out.RRLSlipped += st.rrlSlipped.Load()
	}
	for _, st := range s.metrics.udp {
		add("udp", st)
	}
	add("tcp", s.metrics.tcp)
	return out
}

func rcodeName(rc int) string {
	if n, ok := dns.RcodeToString[rc]; ok {
		return n
	}
	return "OTHER"
}

var (
	descResponses = prometheus.NewDesc("etcdfed_dns_responses_total",
		"DNS responses sent by the embedded server, by transport and response code.", []string{"proto", "rcode"}, nil)
	descDropped = prometheus.NewDesc("etcdfed_dns_dropped_requests_total",
		"Requests the embedded server left unanswered (malformed header or not a request).", []string{"proto"}, nil)
	descZones = prometheus.NewDesc("etcdfed_dns_zones",
		"Zones the embedded server serves.", nil, nil)
	descZoneChanges = prometheus.NewDesc("etcdfed_dns_zone_changes_total",
		"Zone swaps (SetZone, RemoveZone, updates) of the embedded server.", nil, nil)
	descRRL = prometheus.NewDesc("etcdfed_dns_rate_limited_responses_total",
		"UDP responses the response-rate limiter held back, by action: dropped, or slipped (sent truncated so a real client retries over TCP).", []string{"action"}, nil)
)

// Collector returns a Prometheus collector over the server's counters;
// register it with the process's registry.
func (s *Server) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descResponses
	ch <- descDropped
	ch <- descZones
	ch <- descZoneChanges
	ch <- descRRL
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for proto, byRcode := range st.Responses {
		for rc, v := range byRcode {
			ch <- prometheus.MustNewConstMetric(descResponses, prometheus.CounterValue, float64(v), proto, rc)
		}
	}
	for proto, v := range st.Dropped {
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(v), proto)
	}
	ch <- prometheus.MustNewConstMetric(descZones, prometheus.GaugeValue, float64(st.Zones))
	ch <- prometheus.MustNewConstMetric(descZoneChanges, prometheus.CounterValue, float64(st.ZoneChanges))
	ch <- prometheus.MustNewConstMetric(descRRL, prometheus.CounterValue, float64(st.RRLDropped), "dropped")
	ch <- prometheus.MustNewConstMetric(descRRL, prometheus.CounterValue, float64(st.RRLSlipped), "slipped")
}
