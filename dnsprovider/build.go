package dnsprovider

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// Defaults used by Build.
const (
	DefaultTTL        = 30
	DefaultPeerPort   = 2380
	DefaultClientPort = 2379
	// SOA timers. Nothing in etcdfed transfers zones to secondaries, so
	// these only matter to a secondary an operator sets up by hand.
	DefaultSOARefresh = 3600
	DefaultSOARetry   = 600
	DefaultSOAExpire  = 1209600
)

// Spec is what the record set of one etcd cluster is computed from.
type Spec struct {
	// Domain is the zone origin, for example "main.etcd.example.com."; a
	// missing trailing dot is added.
	Domain string
	// TTL of every record, in seconds; 0 means DefaultTTL.
	TTL int32
	// NegativeTTL is the SOA minimum, how long resolvers cache NXDOMAIN
	// and NODATA; 0 means TTL.
	NegativeTTL int32
	// Owner identifies the writer, for example the EtcdCluster's UID.
	Owner string
	// TLS selects _etcd-server-ssl/_etcd-client-ssl SRV names; without it
	// _etcd-server/_etcd-client.
	TLS bool
	// Members get "<name>.<domain>" records and SRV entries.
	Members []Member
	// NameServers are the zone's NS records; at least one.
	NameServers []NameServer
	// Hostmaster is the SOA RNAME; "" means "hostmaster.<domain>".
	Hostmaster string
	// Serial overrides the SOA serial. 0 means a serial derived from a hash
	// of the content: it changes whenever the content changes and stays
	// the same when it does not, but it does not grow monotonically, so a
	// secondary fed by AXFR/IXFR needs a monotonic Serial instead.
	Serial uint32
}

// Member is one etcd member's exposed address.
type Member struct {
	// Name is the member name, one DNS label such as "main-0".
	Name string
	// Addresses of the member: at most one IPv4 and one IPv6 (etcd needs
	// one address per name). Exclusive with Hostname.
	Addresses []netip.Addr
	// Hostname, for example a load balancer's name, makes the member's
	// record a CNAME. Exclusive with Addresses.
	Hostname string
	// PeerPort and ClientPort for the SRV records; 0 means 2380 and 2379.
	PeerPort   int32
	ClientPort int32
	// NoSRV leaves the name out of the SRV records: the name of one
	// incarnation (a member's second name while it moves), not a member
	// clients discover.
	NoSRV bool
}

// NameServer is one NS record of the zone. A name inside the domain needs
// glue Addresses; a name outside it must have none.
type NameServer struct {
	Name      string
	Addresses []netip.Addr
}

// SRV record names.
const (
	SRVServerTLS = "_etcd-server-ssl._tcp"
	SRVClientTLS = "_etcd-client-ssl._tcp"
	SRVServer    = "_etcd-server._tcp"
	SRVClient    = "_etcd-client._tcp"
)

// MemberName returns the absolute name of a member's record.
func MemberName(domain, member string) string {
	return strings.ToLower(member) + "." + strings.ToLower(dns.Fqdn(domain))
}

// Build computes the record set of an etcd cluster: A/AAAA (or CNAME) per
// member, the peer and client SRV records, SOA, NS with glue, and the
// ownership record. Bad input gives an error wrapping ErrInvalid that names
// every problem.
func Build(spec Spec) (*RecordSet, error) {
	if spec.Domain == "" {
		return nil, fmt.Errorf("%w: domain is empty", ErrInvalid)
	}
	origin, err := checkOrigin(dns.Fqdn(spec.Domain))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	b := &builder{origin: origin, ttl: spec.TTL}
	if b.ttl == 0 {
		b.ttl = DefaultTTL
	}
	if b.ttl < 0 {
		b.bad("TTL %d out of range 1..%d", spec.TTL, MaxTTL)
	}
	negTTL := spec.NegativeTTL
	if negTTL == 0 {
		negTTL = b.ttl
	}
	if negTTL < 0 {
		b.bad("negative TTL %d out of range 1..%d", spec.NegativeTTL, MaxTTL)
	}
	if err := checkOwner(spec.Owner); err != nil {
		b.bad("%w", err)
	}
	if len(spec.NameServers) == 0 {
		b.bad("no name servers: give at least one (for example ns1.%s with its address)", origin)
	}
	if len(spec.Members) == 0 {
		b.bad("no members")
	}
	nsNames := b.nameServers(spec.NameServers)
	b.members(spec.Members, spec.TLS, nsNames)
	if len(b.errs) > 0 {
		return nil, fmt.Errorf("%w for domain %s: %w", ErrInvalid, origin, errors.Join(b.errs...))
	}
	return b.seal(spec, nsNames, negTTL)
}

// builder collects the records of one Build, and every problem it finds.
type builder struct {
	origin string
	ttl    int32
	recs   []Record
	errs   []error
}

// bad records a problem.
func (b *builder) bad(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

// add adds data to the RRset of name and type.
func (b *builder) add(name, typ string, data ...string) {
	for i := range b.recs {
		if b.recs[i].Name == name && b.recs[i].Type == typ {
			b.recs[i].Data = append(b.recs[i].Data, data...)
			return
		}
	}
	b.recs = append(b.recs, Record{Name: name, Type: typ, TTL: b.ttl, Data: data})
}

// addAddrs adds the A and AAAA records of name: at most one of each.
func (b *builder) addAddrs(what, name string, addrs []netip.Addr) {
	var v4, v6 int
	for _, a := range addrs {
		switch {
		case !a.IsValid():
			b.bad("%s: invalid address", what)
		case a.Is4() || a.Is4In6():
			v4++
			b.add(name, "A", a.Unmap().String())
		default:
			if a.Zone() != "" {
				b.bad("%s: address %s has a zone", what, a)
				continue
			}
			v6++
			b.add(name, "AAAA", a.String())
		}
	}
	if v4 > 1 || v6 > 1 {
		b.bad("%s: %d IPv4 and %d IPv6 addresses; at most one of each (etcd needs one address per name)", what, v4, v6)
	}
}

// nameServers checks the name servers, adds the glue of those inside the
// zone, and returns their names.
func (b *builder) nameServers(nss []NameServer) []string {
	var nsNames []string
	for i, ns := range nss {
		what := fmt.Sprintf("name server %d (%s)", i, ns.Name)
		name := strings.ToLower(dns.Fqdn(ns.Name))
		if ns.Name == "" {
			b.bad("%s: name is empty", what)
			continue
		}
		if err := checkName(name); err != nil {
			b.bad("%s: %w", what, err)
			continue
		}
		if slices.Contains(nsNames, name) {
			b.bad("%s: listed twice", what)
			continue
		}
		nsNames = append(nsNames, name)
		inZone := dns.IsSubDomain(b.origin, name)
		switch {
		case inZone && name == b.origin:
			b.bad("%s: a name server cannot be the zone apex", what)
		case inZone && len(ns.Addresses) == 0:
			b.bad("%s: inside %s, so it needs glue addresses", what, b.origin)
		case !inZone && len(ns.Addresses) > 0:
			b.bad("%s: outside %s, so it cannot carry glue addresses", what, b.origin)
		case inZone:
			b.addAddrs(what, name, ns.Addresses)
		}
	}
	return nsNames
}

// members checks the members and adds each one's address records (or
// CNAME) and its peer and client SRV entries (TLS: the -ssl names).
func (b *builder) members(ms []Member, tls bool, nsNames []string) {
	server, client := SRVServer, SRVClient
	if tls {
		server, client = SRVServerTLS, SRVClientTLS
	}
	seen := map[string]bool{}
	for i, m := range ms {
		what := fmt.Sprintf("member %d (%s)", i, m.Name)
		if _, ok := dns.IsDomainName(m.Name); !ok || m.Name == "" || strings.Contains(m.Name, ".") || strings.ToLower(m.Name) != m.Name || strings.HasPrefix(m.Name, "_") {
			b.bad("%s: name must be one lowercase DNS label", what)
			continue
		}
		name := MemberName(b.origin, m.Name)
		if err := checkName(name); err != nil {
			b.bad("%s: %w", what, err)
			continue
		}
		if seen[name] || slices.Contains(nsNames, name) {
			b.bad("%s: name used twice", what)
			continue
		}
		seen[name] = true
		b.memberAddress(what, name, m)
		peer, cl := m.PeerPort, m.ClientPort
		if peer == 0 {
			peer = DefaultPeerPort
		}
		if cl == 0 {
			cl = DefaultClientPort
		}
		if peer < 1 || peer > 65535 || cl < 1 || cl > 65535 {
			b.bad("%s: ports %d/%d out of range 1..65535", what, m.PeerPort, m.ClientPort)
			continue
		}
		if m.NoSRV {
			continue
		}
		b.add(server+"."+b.origin, "SRV", srv(peer, name))
		b.add(client+"."+b.origin, "SRV", srv(cl, name))
	}
}

// memberAddress adds a member's A and AAAA records, or its CNAME.
func (b *builder) memberAddress(what, name string, m Member) {
	switch {
	case len(m.Addresses) > 0 && m.Hostname != "":
		b.bad("%s: give addresses or a hostname, not both", what)
	case len(m.Addresses) == 0 && m.Hostname == "":
		b.bad("%s: no address: give IPv4/IPv6 addresses or a hostname", what)
	case m.Hostname != "":
		target := strings.ToLower(dns.Fqdn(m.Hostname))
		if err := checkName(target); err != nil {
			b.bad("%s: hostname %q: %w", what, m.Hostname, err)
		} else if target == name {
			b.bad("%s: hostname points at the member's own name", what)
		} else {
			b.add(name, "CNAME", target)
		}
	default:
		b.addAddrs(what, name, m.Addresses)
	}
}

// seal adds the ownership record, the NS RRset and the SOA (its serial
// spec.Serial, or derived from the content) to checked records.
func (b *builder) seal(spec Spec, nsNames []string, negTTL int32) (*RecordSet, error) {
	origin, ttl, recs := b.origin, b.ttl, b.recs
	var keys []RRsetKey
	for _, r := range recs {
		keys = append(keys, RRsetKey{r.Name, dns.StringToType[r.Type]})
	}
	own, err := OwnershipRecord(origin, spec.Owner, ttl, keys)
	if err != nil {
		return nil, err
	}
	recs = append(recs, own)
	recs = append(recs, Record{Name: origin, Type: "NS", TTL: ttl, Data: nsNames})

	hostmaster := spec.Hostmaster
	if hostmaster == "" {
		hostmaster = "hostmaster." + origin
	}
	soa := func(serial uint32) Record {
		return Record{Name: origin, Type: "SOA", TTL: ttl, Data: []string{fmt.Sprintf("%s %s %d %d %d %d %d",
			nsNames[0], dns.Fqdn(hostmaster), serial, DefaultSOARefresh, DefaultSOARetry, DefaultSOAExpire, negTTL)}}
	}
	serial := spec.Serial
	if serial == 0 {
		tmp, err := ParseRecords(origin, append(slices.Clone(recs), soa(0)))
		if err != nil {
			return nil, err
		}
		serial = ContentSerial(tmp)
	}
	return ParseRecords(origin, append(recs, soa(serial)))
}

func srv(port int32, target string) string {
	return "0 0 " + strconv.Itoa(int(port)) + " " + target
}

// ContentSerial derives an SOA serial from the set's content, ignoring the
// SOA serial itself: equal content gives an equal serial. It is never 0.
func ContentSerial(s *RecordSet) uint32 {
	h := sha256.New()
	h.Write([]byte(s.origin))
	for _, r := range s.Records() {
		if r.Type == "SOA" {
			soa := s.SOA()
			c := *soa
			c.Serial = 0
			r.Data = []string{rdata(&c)}
		}
		fmt.Fprintf(h, "\n%s %s %d", r.Name, r.Type, r.TTL)
		for _, d := range r.Data {
			h.Write([]byte{0})
			h.Write([]byte(d))
		}
	}
	v := binary.BigEndian.Uint32(h.Sum(nil))
	if v == 0 {
		v = 1
	}
	return v
}
