// Package reports validates what spokes report before the hub uses it
// (rule 14). A member cluster writes the status of its EtcdMembers and of
// its EtcdSpoke, and the hub carries some of those fields into other
// clusters and into the hub itself: a member's peer URL into every other
// member's --initial-cluster and into etcd's member list, its address
// into the ring's DNS records served by every spoke, its client URL into
// the hub's etcd endpoints, a spoke's DNS addresses into every ring's NS
// glue, its gossip address into every other spoke's gossip peers, its
// zones and unschedulable zones into placement and other members'
// objects, its round trips to the other spokes into the ring's round-trip
// matrix, from which timing and the leader's place are chosen (rules 15
// and 16). A member cluster that is compromised, or a spoke with a bug,
// must not reach further than its own members through them.
//
// Each check is a pure function of one reported value and what the hub
// expects (the member's DNS name, the ring's TLS mode and exposure, the
// ports etcdfed uses, the zones the cluster was registered with);
// MemberStatus, SpokeStatus and SpokeZones apply them to a whole status
// and return it with every refused field cleared (a refused entry of a
// list dropped), and the rejections, each naming the field, the value
// (cut short) and why. TestPackageDocNamesEveryCheckedField keeps the
// list of fields above equal to the fields checked. The hub treats a
// cleared field as not reported: it waits, keeps the last good value it
// recorded, or leaves the member out; it never propagates the bad one,
// and one member's bad report never holds up the others.
package reports

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
)

// Bounds of reported values; longer ones are refused without parsing.
const (
	// MaxURL: scheme, a DNS name (253) and a port.
	MaxURL = 300
	// MaxAddress: a DNS name (a load balancer's) or an IP.
	MaxAddress = 253
	// MaxHostPort: an IPv6 address in brackets with a port and a zone.
	MaxHostPort = 64
	// MaxDNSAddresses a spoke may report; the rest are refused.
	MaxDNSAddresses = 8
	// MaxZones a spoke may report.
	MaxZones = 64
	// MaxValueInMessage: how much of a refused value a message quotes.
	MaxValueInMessage = 80
)

// Member is what the hub expects of one member's report.
type Member struct {
	// DNSName is the member's DNS name as the hub names it
	// (<member>.<domain>): its URLs must name it and nothing else.
	DNSName string
	// Domain is the ring's domain: a load balancer's hostname must lie
	// outside it (a CNAME into the ring's own zone would point the
	// member's name at another member's record).
	Domain string
	// TLS: the URLs are https, else http.
	TLS bool
	// NodePort: the member is exposed through node ports, so its URLs
	// may carry any port; otherwise they carry etcd's ports (2380 peer,
	// 2379 client).
	NodePort bool
	// LoadBalancer: the address may be a hostname.
	LoadBalancer bool
	// AllowLoopback accepts loopback addresses (the local environment).
	AllowLoopback bool
}

// Rejection is one refused field of a report.
type Rejection struct {
	// Field is the field's path in the object, e.g. status.peerURL.
	Field string
	// Value is the value as reported, cut to MaxValueInMessage.
	Value string
	Err   error
}

func (r Rejection) String() string {
	return fmt.Sprintf("%s %q: %v", r.Field, r.Value, r.Err)
}

func reject(field, value string, err error) Rejection {
	value = text.Truncate(value, MaxValueInMessage)
	return Rejection{Field: field, Value: value, Err: err}
}

// errTooLong is returned for a value over its bound.
var errTooLong = errors.New("too long")

// CheckPeerURL checks a member's reported peer URL: exactly
// scheme://<its DNS name>:<port>, the scheme of the ring's TLS mode, the
// peer port etcdfed uses (any port with NodePort exposure, not the
// client's), no user, path, query or fragment.
func CheckPeerURL(u string, m Member) error {
	return checkURL(u, m, etcdfedv1.DefaultPeerPort)
}

// CheckClientURL is CheckPeerURL for the client URL.
func CheckClientURL(u string, m Member) error {
	return checkURL(u, m, etcdfedv1.DefaultClientPort)
}

func checkURL(u string, m Member, port int32) error {
	if len(u) > MaxURL {
		return fmt.Errorf("%w (%d characters, at most %d)", errTooLong, len(u), MaxURL)
	}
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	scheme := "http"
	if m.TLS {
		scheme = "https"
	}
	switch {
	case p.Scheme != scheme:
		return fmt.Errorf("scheme %q, want %s", p.Scheme, scheme)
	case p.User != nil:
		return errors.New("carries a user")
	case p.Path != "" || p.RawQuery != "" || p.Fragment != "" || p.Opaque != "" || p.ForceQuery:
		return errors.New("carries a path, query or fragment")
	case p.Hostname() != m.DNSName:
		return fmt.Errorf("host %q is not the member's DNS name %s", p.Hostname(), m.DNSName)
	}
	got, err := strconv.ParseInt(p.Port(), 10, 32)
	if err != nil || got < 1 || got > 65535 {
		return fmt.Errorf("port %q is not a port", p.Port())
	}
	if !m.NodePort && int32(got) != port {
		return fmt.Errorf("port %d, want %d", got, port)
	}
	// Re-rendered, the URL must read the same: no leading zeros, no
	// trailing colon, nothing url.Parse tolerated.
	if want := etcdfedv1.MemberURL(tlsMode(m.TLS), m.DNSName, int32(got)); u != want {
		return fmt.Errorf("not in the form %s", want)
	}
	return nil
}

func tlsMode(on bool) etcdfedv1.TLSMode {
	if on {
		return etcdfedv1.TLSEnabled
	}
	return etcdfedv1.TLSDisabled
}

// CheckAddress checks a member's reported address (what its DNS record
// points at): an IP address that is unicast and routable (not
// unspecified, multicast, link-local, broadcast; loopback only when
// allowed), or, with LoadBalancer exposure, a DNS name outside the ring's
// domain.
func CheckAddress(a string, m Member) error {
	if len(a) > MaxAddress {
		return fmt.Errorf("%w (%d characters, at most %d)", errTooLong, len(a), MaxAddress)
	}
	if ip, err := netip.ParseAddr(a); err == nil {
		return CheckIP(ip, m.AllowLoopback)
	}
	if !m.LoadBalancer {
		return errors.New("not an IP address")
	}
	if msgs := validation.IsDNS1123Subdomain(a); len(msgs) > 0 {
		return fmt.Errorf("neither an IP address nor a DNS name: %s", strings.Join(msgs, "; "))
	}
	d := strings.ToLower(strings.TrimSuffix(m.Domain, "."))
	if h := strings.ToLower(a); h == d || strings.HasSuffix(h, "."+d) {
		return fmt.Errorf("a hostname inside the ring's own domain %s", d)
	}
	return nil
}

// CheckIP: a unicast address another cluster may reach.
func CheckIP(ip netip.Addr, allowLoopback bool) error {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return errors.New("not an IP address")
	case ip.Zone() != "":
		return errors.New("an IPv6 address with a zone")
	case ip.IsUnspecified():
		return errors.New("the unspecified address")
	case ip.IsLoopback() && !allowLoopback:
		return errors.New("a loopback address (the hub allows them with --allow-loopback-member-addresses, for a local environment only)")
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast(), ip.IsLinkLocalMulticast():
		return errors.New("a multicast address")
	case ip.IsLinkLocalUnicast():
		return errors.New("a link-local address")
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return errors.New("the broadcast address")
	}
	return nil
}

// CheckHostPort checks an IP:port a spoke reports (a DNS server, its
// gossip address); with portOptional, a bare IP is accepted too.
func CheckHostPort(a string, allowLoopback, portOptional bool) error {
	if len(a) > MaxHostPort {
		return fmt.Errorf("%w (%d characters, at most %d)", errTooLong, len(a), MaxHostPort)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		if !portOptional {
			return errors.New("not IP:port")
		}
		host, port = a, ""
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("host %q is not an IP address", host)
	}
	if err := CheckIP(ip, allowLoopback); err != nil {
		return err
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("port %q is not a port", port)
		}
	}
	return nil
}

// CheckZone checks a zone a spoke reports: a label value (it becomes a
// member's spec.zone, a node affinity, a label).
func CheckZone(z string) error {
	if z == "" {
		return errors.New("empty")
	}
	if msgs := validation.IsValidLabelValue(z); len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// MemberStatus returns st with every field m refuses cleared, and the
// rejections. Fields are checked only when reported (an empty one is
// "not yet").
func MemberStatus(st etcdfedv1.EtcdMemberStatus, m Member) (etcdfedv1.EtcdMemberStatus, []Rejection) {
	var out []Rejection
	if st.PeerURL != "" {
		if err := CheckPeerURL(st.PeerURL, m); err != nil {
			out = append(out, reject("status.peerURL", st.PeerURL, err))
			st.PeerURL = ""
		}
	}
	if st.ClientURL != "" {
		if err := CheckClientURL(st.ClientURL, m); err != nil {
			out = append(out, reject("status.clientURL", st.ClientURL, err))
			st.ClientURL = ""
		}
	}
	if st.PeerURL != "" && st.PeerURL == st.ClientURL {
		out = append(out, reject("status.clientURL", st.ClientURL, errors.New("the same as the peer URL")))
		st.PeerURL, st.ClientURL = "", ""
	}
	if st.Address != "" {
		if err := CheckAddress(st.Address, m); err != nil {
			out = append(out, reject("status.address", st.Address, err))
			st.Address = ""
		}
	}
	return st, out
}

// SpokeStatus returns st with every refused field cleared (a refused
// entry of a list dropped), and the rejections.
func SpokeStatus(st etcdfedv1.EtcdSpokeStatus, allowLoopback bool) (etcdfedv1.EtcdSpokeStatus, []Rejection) {
	var out []Rejection
	st.DNSAddresses, out = checkList("status.dnsAddresses", st.DNSAddresses, MaxDNSAddresses, func(a string) error { return CheckHostPort(a, allowLoopback, true) }, out)
	if st.GossipAddress != "" {
		if err := CheckHostPort(st.GossipAddress, allowLoopback, false); err != nil {
			out = append(out, reject("status.gossipAddress", st.GossipAddress, err))
			st.GossipAddress = ""
		}
	}
	st.Zones, out = checkList("status.zones", st.Zones, MaxZones, CheckZone, out)
	// The empty string stands for a cluster without zones there.
	st.UnschedulableZones, out = checkList("status.unschedulableZones", st.UnschedulableZones, MaxZones, func(z string) error {
		if z == "" {
			return nil
		}
		return CheckZone(z)
	}, out)
	st.RoundTrips, out = checkRoundTrips(st.RoundTrips, out)
	return st, out
}

// RegisteredZones are the zones a cluster's registration labels register
// (etcdfedv1.LabelRegisteredZonePrefix), sorted; nil when it registers
// none (then every zone the spoke reports is taken, as checked by
// CheckZone).
func RegisteredZones(labels map[string]string) []string {
	var out []string
	for k := range labels {
		if z, ok := strings.CutPrefix(k, etcdfedv1.LabelRegisteredZonePrefix); ok && z != "" {
			out = append(out, z)
		}
	}
	slices.Sort(out)
	return out
}

// SpokeZones returns st with the zones (and unschedulable zones) outside
// registered dropped, and a rejection for each; st as it is when
// registered is empty. A zone the member cluster was not registered with
// must not steer placement: it would be a failure domain of its own, so
// the ring could put more members in that one cluster than its real
// zones allow.
func SpokeZones(st etcdfedv1.EtcdSpokeStatus, registered []string) (etcdfedv1.EtcdSpokeStatus, []Rejection) {
	if len(registered) == 0 {
		return st, nil
	}
	var out []Rejection
	inRegistration := func(z string) error {
		if z == "" || slices.Contains(registered, z) {
			return nil
		}
		return fmt.Errorf("not a zone the cluster is registered with (%s)", strings.Join(registered, ", "))
	}
	st.Zones, out = checkList("status.zones", st.Zones, MaxZones, inRegistration, out)
	st.UnschedulableZones, out = checkList("status.unschedulableZones", st.UnschedulableZones, MaxZones, inRegistration, out)
	return st, out
}

// CheckRoundTrip checks one round trip a spoke reports to a peer (rule
// 15): the peer named as a member cluster is (a DNS subdomain), 0 <=
// median <= p99 <= etcdfedv1.MaxRoundTripMicros, at least one sample. A
// refused entry is left out of the ring's matrix; the others are used.
func CheckRoundTrip(r etcdfedv1.PeerRoundTrip) error {
	switch {
	case r.Cluster == "":
		return errors.New("no peer cluster")
	case len(r.Cluster) > validation.DNS1123SubdomainMaxLength:
		return fmt.Errorf("peer cluster %w (%d characters, at most %d)", errTooLong, len(r.Cluster), validation.DNS1123SubdomainMaxLength)
	case len(validation.IsDNS1123Subdomain(r.Cluster)) > 0:
		return fmt.Errorf("peer cluster %q is not a member cluster name: %s", text.Truncate(r.Cluster, MaxValueInMessage), strings.Join(validation.IsDNS1123Subdomain(r.Cluster), "; "))
	case r.MedianMicros < 0 || r.P99Micros < 0:
		return fmt.Errorf("a negative round trip (median %d, p99 %d µs)", r.MedianMicros, r.P99Micros)
	case r.P99Micros > etcdfedv1.MaxRoundTripMicros:
		return fmt.Errorf("p99 %d µs is over %d µs", r.P99Micros, etcdfedv1.MaxRoundTripMicros)
	case r.MedianMicros > r.P99Micros:
		return fmt.Errorf("median %d µs is over the p99 %d µs", r.MedianMicros, r.P99Micros)
	case r.Samples < 1:
		return fmt.Errorf("%d samples", r.Samples)
	}
	return nil
}

// checkRoundTrips keeps the round trips CheckRoundTrip accepts, at most
// etcdfedv1.MaxRoundTrips, each peer once (a repeated peer is refused
// every time: which of them would be true?).
func checkRoundTrips(list []etcdfedv1.PeerRoundTrip, out []Rejection) ([]etcdfedv1.PeerRoundTrip, []Rejection) {
	seen := map[string]int{}
	for _, r := range list {
		seen[r.Cluster]++
	}
	var ok []etcdfedv1.PeerRoundTrip
	for i, r := range list {
		f := fmt.Sprintf("status.roundTrips[%d]", i)
		v := fmt.Sprintf("%s median=%d p99=%d samples=%d", r.Cluster, r.MedianMicros, r.P99Micros, r.Samples)
		switch err := CheckRoundTrip(r); {
		case i >= etcdfedv1.MaxRoundTrips:
			out = append(out, reject(f, v, fmt.Errorf("more than %d entries", etcdfedv1.MaxRoundTrips)))
		case err != nil:
			out = append(out, reject(f, v, err))
		case seen[r.Cluster] > 1:
			out = append(out, reject(f, v, errors.New("the peer is reported more than once")))
		default:
			ok = append(ok, r)
		}
	}
	return ok, out
}

// checkList keeps the entries of list that check accepts, at most max of
// them, and adds a rejection for each other.
func checkList(field string, list []string, max int, check func(string) error, out []Rejection) ([]string, []Rejection) {
	var ok []string
	for i, v := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch err := check(v); {
		case i >= max:
			out = append(out, reject(f, v, fmt.Errorf("more than %d entries", max)))
		case err != nil:
			out = append(out, reject(f, v, err))
		default:
			ok = append(ok, v)
		}
	}
	return ok, out
}
