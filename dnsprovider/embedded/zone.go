package embedded

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/etcdfed/etcdfed/dnsprovider"
)

// maxCNAMEChain bounds CNAME chasing inside a zone.
const maxCNAMEChain = 8

// snapshot is an immutable view of every zone the server serves. A request
// loads one snapshot and answers from it only, so a swap never mixes old
// and new data in one answer.
type snapshot struct {
	zones map[string]*zone // by lowercase wire-format origin
}

// zone is one compiled zone.
type zone struct {
	set    *dnsprovider.RecordSet
	origin string // presentation, lowercase
	wire   string // wire format, lowercase
	soa    *dns.SOA
	nodes  map[string]*node // by lowercase wire-format name; empty non-terminals included

	// nxVariant is the precomputed NXDOMAIN answer: its body is the
	// authority SOA whose first two bytes are a compression pointer to the
	// origin inside the question, filled in per query.
	nxVariant variant
}

type node struct {
	name   string // presentation, lowercase
	rrsets []rrset
	cname  *dns.CNAME

	// Precomputed answers for the fast path, without EDNS.
	fast   []fastEntry
	nodata *prepared
}

type rrset struct {
	rtype uint16
	rrs   []dns.RR
}

type fastEntry struct {
	qtype uint16
	p     *prepared
}

// prepared holds the packed forms of one answer minus header and question,
// valid for any question whose name equals the node's name up to case: the
// full answer first, then the same answer cut down the way truncate cuts it
// (no additional data; no authority data; no records and TC), so that the
// fast path picks the same form the full path would send.
type prepared struct {
	variants []variant
}

type variant struct {
	rcode            int
	tc               bool
	ancount, nscount uint16
	arcount          uint16
	body             []byte
}

func (n *node) get(t uint16) []dns.RR {
	for _, rs := range n.rrsets {
		if rs.rtype == t {
			return rs.rrs
		}
	}
	return nil
}

func (n *node) prepared(qtype uint16) *prepared {
	for _, f := range n.fast {
		if f.qtype == qtype {
			return f.p
		}
	}
	if n.cname != nil {
		return nil
	}
	return n.nodata
}

// wireName returns the lowercase wire form of a presentation name.
func wireName(name string) (string, error) {
	buf := make([]byte, 256)
	off, err := dns.PackDomainName(dns.Fqdn(name), buf, 0, nil, false)
	if err != nil {
		return "", err
	}
	lowerASCII(buf[:off])
	return string(buf[:off]), nil
}

func lowerASCII(b []byte) {
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
}

// compileZone indexes a record set for serving and precomputes answers.
func compileZone(set *dnsprovider.RecordSet) (*zone, error) {
	soa := set.SOA()
	if soa == nil {
		return nil, fmt.Errorf("zone %s has no SOA record: a served zone needs one", set.Origin())
	}
	if _, ok := set.Get(set.Origin(), dns.TypeNS); !ok {
		return nil, fmt.Errorf("zone %s has no NS records: a served zone needs at least one", set.Origin())
	}
	z := &zone{set: set, origin: set.Origin(), soa: soa, nodes: map[string]*node{}}
	var err error
	if z.wire, err = wireName(z.origin); err != nil {
		return nil, err
	}
	nodeFor := func(name string) (*node, error) {
		w, err := wireName(name)
		if err != nil {
			return nil, err
		}
		n := z.nodes[w]
		if n == nil {
			n = &node{name: name}
			z.nodes[w] = n
		}
		return n, nil
	}
	for _, rs := range set.RRsets() {
		n, err := nodeFor(rs.Name)
		if err != nil {
			return nil, err
		}
		n.rrsets = append(n.rrsets, rrset{rtype: rs.Type, rrs: rs.RRs})
		if rs.Type == dns.TypeCNAME {
			n.cname = rs.RRs[0].(*dns.CNAME)
		}
		// Empty non-terminals between the name and the origin exist too.
		for p := rs.Name; p != z.origin; {
			i := strings.IndexByte(p, '.')
			p = p[i+1:]
			if _, err := nodeFor(p); err != nil {
				return nil, err
			}
		}
	}

	// The NXDOMAIN body: SOA with the owner replaced by a 2-byte pointer.
	neg := negativeSOA(soa)
	buf := make([]byte, dns.Len(neg)+16)
	off, err := dns.PackRR(neg, buf, 0, nil, false)
	if err != nil {
		return nil, fmt.Errorf("pack SOA: %w", err)
	}
	z.nxVariant = variant{rcode: dns.RcodeNameError, nscount: 1, body: append([]byte{0xc0, 0}, buf[len(z.wire):off]...)}

	// Precompute the answers the fast path serves.
	snap := &snapshot{zones: map[string]*zone{z.wire: z}}
	for w, n := range z.nodes {
		types := []uint16{}
		for _, rs := range n.rrsets {
			types = append(types, rs.rtype)
		}
		if n.cname != nil {
			types = append(types, dns.TypeA, dns.TypeAAAA)
		}
		for _, t := range types {
			p, err := snap.prepare(w, n.name, t)
			if err != nil {
				return nil, err
			}
			n.fast = append(n.fast, fastEntry{t, p})
		}
		if n.cname == nil {
			// Any type the node lacks gives the same NODATA answer.
			if n.nodata, err = snap.prepare(w, n.name, dns.TypeNULL); err != nil {
				return nil, err
			}
		}
	}
	return z, nil
}

// prepare runs the full answer path for (name, qtype) and keeps the bytes
// after the question, for the full answer and its truncated forms.
func (s *snapshot) prepare(wire, name string, qtype uint16) (*prepared, error) {
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	p := &prepared{}
	for i := range 4 {
		resp := s.answer(req)
		switch i {
		case 3:
			resp.Answer, resp.Truncated = nil, true
			fallthrough
		case 2:
			resp.Ns = nil
			fallthrough
		case 1:
			resp.Extra = nil
		}
		resp.Compress = true
		b, err := resp.Pack()
		if err != nil {
			return nil, fmt.Errorf("pack answer for %s %s: %w", name, dns.TypeToString[qtype], err)
		}
		qend := 12 + len(wire) + 4
		if len(b) < qend {
			return nil, fmt.Errorf("packed answer for %s too short", name)
		}
		p.variants = append(p.variants, variant{
			rcode:   resp.Rcode,
			tc:      resp.Truncated,
			ancount: binary.BigEndian.Uint16(b[6:]),
			nscount: binary.BigEndian.Uint16(b[8:]),
			arcount: binary.BigEndian.Uint16(b[10:]),
			body:    slices.Clone(b[qend:]),
		})
		if len(b)+11 <= dns.MinMsgSize {
			break // fits any limit, with or without OPT
		}
	}
	return p, nil
}

// negativeSOA returns the SOA for the authority section of a negative
// answer, with the TTL RFC 2308 asks for.
func negativeSOA(soa *dns.SOA) *dns.SOA {
	c := dns.Copy(soa).(*dns.SOA)
	c.Hdr.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
	return c
}

// findZone returns the zone holding the lowercase wire-format name.
func (s *snapshot) findZone(wire []byte) *zone {
	for off := 0; off < len(wire); {
		if z := s.zones[string(wire[off:])]; z != nil {
			return z
		}
		l := int(wire[off])
		if l == 0 {
			break
		}
		off += 1 + l
	}
	return nil
}

// answer computes the reply to a parsed standard query: everything but
// transport concerns (truncation, TSIG). It never fails.
func (s *snapshot) answer(req *dns.Msg) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetReply(req)
	q := req.Question[0]
	if q.Qclass != dns.ClassINET {
		resp.Rcode = dns.RcodeRefused
		return resp
	}
	wbuf := make([]byte, 256)
	off, err := dns.PackDomainName(q.Name, wbuf, 0, nil, false)
	if err != nil {
		resp.Rcode = dns.RcodeFormatError
		return resp
	}
	wire := wbuf[:off]
	lowerASCII(wire)
	z := s.findZone(wire)
	if z == nil {
		// Never an open resolver.
		resp.Rcode = dns.RcodeRefused
		return resp
	}
	resp.Authoritative = true
	switch q.Qtype {
	case dns.TypeAXFR, dns.TypeIXFR, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeMAILA, dns.TypeMAILB:
		resp.Rcode = dns.RcodeNotImplemented
		resp.Authoritative = false
		return resp
	}
	name := string(wire)
	for range maxCNAMEChain {
		n := z.nodes[name]
		if n == nil {
			resp.Rcode = dns.RcodeNameError
			resp.Ns = append(resp.Ns, negativeSOA(z.soa))
			return resp
		}
		if q.Qtype == dns.TypeANY && len(n.rrsets) > 0 {
			for _, rs := range n.rrsets {
				resp.Answer = append(resp.Answer, rs.rrs...)
			}
			return resp
		}
		if rrs := n.get(q.Qtype); rrs != nil {
			resp.Answer = append(resp.Answer, rrs...)
			resp.Extra = append(resp.Extra, z.additional(q.Qtype, rrs)...)
			return resp
		}
		if n.cname != nil {
			resp.Answer = append(resp.Answer, n.cname)
			target, err := wireName(n.cname.Target)
			if err != nil || !strings.HasSuffix(target, z.wire) || (len(target) > len(z.wire) && !isLabelBoundary(target, len(target)-len(z.wire))) {
				// Outside the zone: the client chases it.
				return resp
			}
			name = target
			continue
		}
		// The name exists without this type: NODATA.
		resp.Ns = append(resp.Ns, negativeSOA(z.soa))
		return resp
	}
	// CNAME loop or an overlong chain: answer what we have.
	return resp
}

// isLabelBoundary reports whether off starts a label in the wire name.
func isLabelBoundary(wire string, off int) bool {
	for i := 0; i < len(wire); i += 1 + int(wire[i]) {
		if i == off {
			return true
		}
		if wire[i] == 0 {
			break
		}
	}
	return false
}

// additional returns in-zone addresses of SRV and NS targets.
func (z *zone) additional(qtype uint16, rrs []dns.RR) []dns.RR {
	var targets []string
	switch qtype {
	case dns.TypeSRV:
		for _, rr := range rrs {
			targets = append(targets, rr.(*dns.SRV).Target)
		}
	case dns.TypeNS:
		for _, rr := range rrs {
			targets = append(targets, rr.(*dns.NS).Ns)
		}
	default:
		return nil
	}
	var out []dns.RR
	seen := map[string]bool{}
	for _, t := range targets {
		w, err := wireName(t)
		if err != nil || seen[w] {
			continue
		}
		seen[w] = true
		if n := z.nodes[w]; n != nil {
			out = append(out, n.get(dns.TypeA)...)
			out = append(out, n.get(dns.TypeAAAA)...)
		}
	}
	return out
}
