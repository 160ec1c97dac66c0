package dnsprovider

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// ErrInvalid is wrapped by every validation error of this package: a record
// set that fails validation is never sent anywhere.
var ErrInvalid = errors.New("dnsprovider: invalid record set")

// MaxTTL is the largest TTL a record may carry (RFC 2181 section 8).
const MaxTTL = 1<<31 - 1

// Record is one RRset in flat form: the shape the hub writes into member
// clusters and the shape providers exchange. Name is an absolute domain name
// with the trailing dot, Type one of SupportedTypes, TTL in seconds, and Data
// holds one RDATA in zone-file presentation format per resource record (for
// example "10.0.0.1" for A, "0 0 2380 main-0.etcd.example.com." for SRV).
type Record struct {
	Name string   `json:"name"`
	Type string   `json:"type"`
	TTL  int32    `json:"ttl"`
	Data []string `json:"data"`
}

// SupportedTypes lists the record types a RecordSet may hold.
var SupportedTypes = []string{"A", "AAAA", "CNAME", "NS", "SOA", "SRV", "TXT"}

var supportedTypes = map[uint16]bool{
	dns.TypeA: true, dns.TypeAAAA: true, dns.TypeCNAME: true, dns.TypeNS: true,
	dns.TypeSOA: true, dns.TypeSRV: true, dns.TypeTXT: true,
}

// RRset is one validated RRset of a RecordSet.
type RRset struct {
	Name string // lowercase, absolute
	Type uint16
	TTL  uint32
	RRs  []dns.RR // sorted by RDATA, headers filled; do not modify
}

// RecordSet is a validated, immutable set of RRsets below one zone origin,
// in canonical order (SOA first, then by name in DNS canonical order, then
// by type). Build it with Build, ParseRecords or FromRRs.
type RecordSet struct {
	origin string
	owner  string
	sets   []RRset
}

// Origin returns the zone origin (absolute, lowercase).
func (s *RecordSet) Origin() string { return s.origin }

// Owner returns the owner named by the set's ownership TXT record, or "" if
// the set has none.
func (s *RecordSet) Owner() string { return s.owner }

// RRsets returns the set's RRsets in canonical order. The returned slice and
// its records must not be modified.
func (s *RecordSet) RRsets() []RRset { return s.sets }

// SOA returns the zone's SOA record, or nil if the set has none.
func (s *RecordSet) SOA() *dns.SOA {
	for _, rs := range s.sets {
		if rs.Type == dns.TypeSOA {
			return rs.RRs[0].(*dns.SOA)
		}
	}
	return nil
}

// Serial returns the SOA serial, or 0 if the set has no SOA.
func (s *RecordSet) Serial() uint32 {
	if soa := s.SOA(); soa != nil {
		return soa.Serial
	}
	return 0
}

// Get returns the RRset of the given name and type.
func (s *RecordSet) Get(name string, rrtype uint16) (RRset, bool) {
	name = strings.ToLower(dns.Fqdn(name))
	for _, rs := range s.sets {
		if rs.Name == name && rs.Type == rrtype {
			return rs, true
		}
	}
	return RRset{}, false
}

// Records returns the set in flat form. ParseRecords(s.Origin(),
// s.Records()) gives back an equal set.
func (s *RecordSet) Records() []Record {
	out := make([]Record, 0, len(s.sets))
	for _, rs := range s.sets {
		out = append(out, rs.record())
	}
	return out
}

func (rs RRset) record() Record {
	r := Record{Name: rs.Name, Type: dns.TypeToString[rs.Type], TTL: int32(rs.TTL)}
	for _, rr := range rs.RRs {
		r.Data = append(r.Data, rdata(rr))
	}
	return r
}

// RRs returns copies of every resource record of the set, SOA first.
func (s *RecordSet) RRs() []dns.RR {
	var out []dns.RR
	for _, rs := range s.sets {
		for _, rr := range rs.RRs {
			out = append(out, dns.Copy(rr))
		}
	}
	return out
}

// ZoneFile renders the set as an RFC 1035 master file, SOA first, with
// absolute names. BIND and FromZoneFile read it back.
func (s *RecordSet) ZoneFile() string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n", s.origin)
	for _, rs := range s.sets {
		for _, rr := range rs.RRs {
			b.WriteString(rr.String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Equal reports whether two sets have the same origin and the same records.
func (s *RecordSet) Equal(o *RecordSet) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.origin != o.origin || len(s.sets) != len(o.sets) {
		return false
	}
	for i := range s.sets {
		a, b := s.sets[i].record(), o.sets[i].record()
		if a.Name != b.Name || a.Type != b.Type || a.TTL != b.TTL || !slices.Equal(a.Data, b.Data) {
			return false
		}
	}
	return true
}

// rdata returns the presentation form of rr's RDATA.
func rdata(rr dns.RR) string {
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

// ParseRecords validates flat records and returns them as a RecordSet below
// origin. Names are folded to lower case. It fails, wrapping ErrInvalid and
// naming every offending record, on: an invalid origin or name, a name
// outside origin, an unsupported type, a TTL out of 0..MaxTTL, RDATA that
// does not parse, duplicate data or RRsets, an SOA away from the apex or
// with more than one record, NS records below the apex (delegation is not
// supported), a CNAME at the apex, with several targets or beside other
// data, and an ownership record that claims RRsets the set lacks.
func ParseRecords(origin string, recs []Record) (*RecordSet, error) {
	origin, err := checkOrigin(origin)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s := &RecordSet{origin: origin}
	var errs []error
	seen := map[rrKey]bool{}
	for i, r := range recs {
		rs, err := parseRecord(origin, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("record %d (%s %s): %w", i, r.Name, r.Type, err))
			continue
		}
		k := rrKey{rs.Name, rs.Type}
		if seen[k] {
			errs = append(errs, fmt.Errorf("record %d (%s %s): duplicate RRset: merge its data into one record", i, r.Name, r.Type))
			continue
		}
		seen[k] = true
		s.sets = append(s.sets, rs)
	}
	if len(errs) == 0 {
		errs = append(errs, s.checkSet()...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w for zone %s: %w", ErrInvalid, origin, errors.Join(errs...))
	}
	s.sort()
	return s, nil
}

// FromRRs groups resource records into a validated RecordSet below origin.
// All records of one RRset must carry the same TTL.
func FromRRs(origin string, rrs []dns.RR) (*RecordSet, error) {
	var recs []Record
	idx := map[rrKey]int{}
	for _, rr := range rrs {
		h := rr.Header()
		if h.Class != dns.ClassINET {
			return nil, fmt.Errorf("%w: %s: class %s not supported, only IN", ErrInvalid, h.Name, dns.ClassToString[h.Class])
		}
		k := rrKey{strings.ToLower(h.Name), h.Rrtype}
		i, ok := idx[k]
		if !ok {
			i = len(recs)
			idx[k] = i
			recs = append(recs, Record{Name: h.Name, Type: dns.TypeToString[h.Rrtype], TTL: int32(h.Ttl)})
		} else if uint32(recs[i].TTL) != h.Ttl {
			return nil, fmt.Errorf("%w: %s %s: records of one RRset carry different TTLs (%d and %d)", ErrInvalid, h.Name, dns.TypeToString[h.Rrtype], recs[i].TTL, h.Ttl)
		}
		if h.Ttl > MaxTTL {
			return nil, fmt.Errorf("%w: %s %s: TTL %d out of range 0..%d", ErrInvalid, h.Name, dns.TypeToString[h.Rrtype], h.Ttl, MaxTTL)
		}
		recs[i].Data = append(recs[i].Data, rdata(rr))
	}
	return ParseRecords(origin, recs)
}

// FromZoneFile reads an RFC 1035 master file into a validated RecordSet.
func FromZoneFile(origin string, zonefile []byte) (*RecordSet, error) {
	origin, err := checkOrigin(origin)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	zp := dns.NewZoneParser(bytes.NewReader(zonefile), origin, "")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("%w: parse zone file: %w", ErrInvalid, err)
	}
	return FromRRs(origin, rrs)
}

type rrKey struct {
	name  string
	rtype uint16
}

func checkOrigin(origin string) (string, error) {
	if origin == "" {
		return "", errors.New("zone origin is empty")
	}
	o := strings.ToLower(origin)
	if !dns.IsFqdn(o) {
		return "", fmt.Errorf("zone origin %q must be absolute (end with a dot)", origin)
	}
	if err := checkName(o); err != nil {
		return "", fmt.Errorf("zone origin %q: %w", origin, err)
	}
	return o, nil
}

// checkName checks an absolute, lowercase name: at most 253 characters,
// labels of 1 to 63 characters from a-z, 0-9, '-' and '_'.
func checkName(n string) error {
	if n == "." {
		return nil
	}
	if len(n) > 254 {
		return fmt.Errorf("name is %d characters long, at most 253 allowed", len(n)-1)
	}
	for _, l := range strings.Split(strings.TrimSuffix(n, "."), ".") {
		if l == "" {
			return errors.New("empty label")
		}
		if len(l) > 63 {
			return fmt.Errorf("label %q is longer than 63 characters", l)
		}
		for _, c := range []byte(l) {
			if !isLDHU(c) {
				return fmt.Errorf("label %q has character %q: only a-z, 0-9, '-' and '_' are allowed", l, c)
			}
		}
	}
	return nil
}

func parseRecord(origin string, r Record) (RRset, error) {
	name := strings.ToLower(r.Name)
	if !dns.IsFqdn(name) {
		return RRset{}, fmt.Errorf("name %q must be absolute (end with a dot)", r.Name)
	}
	if err := checkName(name); err != nil {
		return RRset{}, fmt.Errorf("name %q: %w", r.Name, err)
	}
	if !dns.IsSubDomain(origin, name) {
		return RRset{}, fmt.Errorf("name %q is outside zone %s", r.Name, origin)
	}
	rtype, ok := dns.StringToType[strings.ToUpper(r.Type)]
	if !ok || !supportedTypes[rtype] {
		return RRset{}, fmt.Errorf("type %q not supported (supported: %s)", r.Type, strings.Join(SupportedTypes, ", "))
	}
	if r.TTL < 0 {
		return RRset{}, fmt.Errorf("TTL %d out of range 0..%d", r.TTL, MaxTTL)
	}
	if len(r.Data) == 0 {
		return RRset{}, errors.New("no data")
	}
	rs := RRset{Name: name, Type: rtype, TTL: uint32(r.TTL)}
	for _, d := range r.Data {
		if strings.ContainsAny(d, "\n\r") {
			return RRset{}, fmt.Errorf("data %q: line breaks not allowed", d)
		}
		if strings.TrimSpace(d) == "" {
			return RRset{}, errors.New("empty data")
		}
		line := fmt.Sprintf("%s %d IN %s %s", name, r.TTL, dns.TypeToString[rtype], d)
		zp := dns.NewZoneParser(strings.NewReader(line), origin, "")
		rr, ok := zp.Next()
		if err := zp.Err(); err != nil {
			return RRset{}, fmt.Errorf("data %q: %w", d, unwrapParseErr(err))
		}
		if !ok || rr == nil {
			return RRset{}, fmt.Errorf("data %q: no record", d)
		}
		if _, more := zp.Next(); more {
			return RRset{}, fmt.Errorf("data %q: more than one record", d)
		}
		if rr.Header().Rrtype != rtype {
			return RRset{}, fmt.Errorf("data %q parses as type %s", d, dns.TypeToString[rr.Header().Rrtype])
		}
		if err := checkRData(rr); err != nil {
			return RRset{}, fmt.Errorf("data %q: %w", d, err)
		}
		for _, o := range rs.RRs {
			if dns.IsDuplicate(o, rr) {
				return RRset{}, fmt.Errorf("data %q appears twice", d)
			}
		}
		rs.RRs = append(rs.RRs, rr)
	}
	slices.SortFunc(rs.RRs, func(a, b dns.RR) int { return strings.Compare(rdata(a), rdata(b)) })
	return rs, nil
}

func unwrapParseErr(err error) error {
	var pe *dns.ParseError
	if errors.As(err, &pe) {
		// ParseError.Error repeats the file and line, which say nothing here.
		msg := err.Error()
		if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "dns: ") {
			msg = msg[i+2:]
		}
		return errors.New(msg)
	}
	return err
}

// checkRData checks names inside RDATA and values the parser lets through.
func checkRData(rr dns.RR) error {
	var names []string
	switch rr := rr.(type) {
	case *dns.A:
		if rr.A.To4() == nil {
			return errors.New("not an IPv4 address")
		}
	case *dns.AAAA:
		if rr.AAAA.To16() == nil || rr.AAAA.To4() != nil {
			return errors.New("not an IPv6 address")
		}
	case *dns.CNAME:
		names = []string{rr.Target}
	case *dns.NS:
		names = []string{rr.Ns}
	case *dns.SRV:
		names = []string{rr.Target}
	case *dns.SOA:
		names = []string{rr.Ns, rr.Mbox}
		if rr.Minttl > MaxTTL {
			return fmt.Errorf("SOA minimum %d out of range 0..%d", rr.Minttl, MaxTTL)
		}
	case *dns.TXT:
		for _, t := range rr.Txt {
			if len(t) > 255 {
				return errors.New("TXT string longer than 255 bytes")
			}
		}
	}
	for _, n := range names {
		if _, ok := dns.IsDomainName(n); !ok || len(n) > 254 {
			return fmt.Errorf("invalid domain name %q", n)
		}
	}
	return nil
}

// checkSet checks the rules that span RRsets.
func (s *RecordSet) checkSet() []error {
	var errs []error
	types := map[string][]uint16{}
	for _, rs := range s.sets {
		types[rs.Name] = append(types[rs.Name], rs.Type)
		switch rs.Type {
		case dns.TypeSOA:
			if rs.Name != s.origin {
				errs = append(errs, fmt.Errorf("%s SOA: SOA only allowed at the zone apex %s", rs.Name, s.origin))
			}
			if len(rs.RRs) != 1 {
				errs = append(errs, fmt.Errorf("%s SOA: exactly one SOA record allowed, got %d", rs.Name, len(rs.RRs)))
			}
		case dns.TypeNS:
			if rs.Name != s.origin {
				errs = append(errs, fmt.Errorf("%s NS: NS only allowed at the zone apex %s (delegation is not supported)", rs.Name, s.origin))
			}
		case dns.TypeCNAME:
			if rs.Name == s.origin {
				errs = append(errs, fmt.Errorf("%s CNAME: CNAME not allowed at the zone apex", rs.Name))
			}
			if len(rs.RRs) != 1 {
				errs = append(errs, fmt.Errorf("%s CNAME: exactly one CNAME target allowed, got %d", rs.Name, len(rs.RRs)))
			}
		}
	}
	for name, ts := range types {
		if len(ts) > 1 && slices.Contains(ts, dns.TypeCNAME) {
			var others []string
			for _, t := range ts {
				if t != dns.TypeCNAME {
					others = append(others, dns.TypeToString[t])
				}
			}
			slices.Sort(others)
			errs = append(errs, fmt.Errorf("%s CNAME: a CNAME cannot stand beside other data (%s)", name, strings.Join(others, ", ")))
		}
	}
	owner, err := s.checkOwnership()
	if err != nil {
		errs = append(errs, err)
	}
	s.owner = owner
	return errs
}

// sort puts the RRsets in canonical order.
func (s *RecordSet) sort() {
	slices.SortFunc(s.sets, func(a, b RRset) int {
		if (a.Type == dns.TypeSOA) != (b.Type == dns.TypeSOA) {
			if a.Type == dns.TypeSOA {
				return -1
			}
			return 1
		}
		if c := CompareNames(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Type) - int(b.Type)
	})
}

// CompareNames orders absolute lowercase names in DNS canonical order (RFC
// 4034 section 6.1): label by label from the right.
func CompareNames(a, b string) int {
	la := dns.SplitDomainName(a)
	lb := dns.SplitDomainName(b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := strings.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	return len(la) - len(lb)
}

// isLDHU reports whether c may appear in a label: a-z, 0-9, '-' or '_'.
func isLDHU(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
