package embedded

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/etcdfed/etcdfed/dnsprovider"
)

// update handles an RFC 2136 UPDATE signed with a configured key (the
// signature was verified before). The result must pass the same validation
// as any record set, or the update is refused and nothing changes.
func (s *Server) update(req *dns.Msg, tsig *dns.TSIG) *dns.Msg {
	rcode := func(rc int) *dns.Msg { return new(dns.Msg).SetRcode(req, rc) }
	if !s.cfg.AllowUpdate || tsig == nil {
		return rcode(dns.RcodeRefused)
	}
	q := req.Question[0]
	if q.Qtype != dns.TypeSOA || q.Qclass != dns.ClassINET {
		return rcode(dns.RcodeFormatError)
	}
	wire, err := wireName(q.Name)
	if err != nil {
		return rcode(dns.RcodeFormatError)
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	z := s.snap.Load().zones[wire]
	if z == nil {
		return rcode(dns.RcodeNotAuth)
	}
	origin := z.origin
	cur, order := z.keyedRRsets()
	if rc := checkPrerequisites(req.Answer, origin, cur); rc != dns.RcodeSuccess {
		return rcode(rc)
	}
	if rc := prescan(req.Ns, origin); rc != dns.RcodeSuccess {
		return rcode(rc)
	}
	work, soaChanged := applyUpdates(req.Ns, z, cur)
	recs := flatten(work, order)
	next, err := dnsprovider.ParseRecords(origin, recs)
	if err != nil {
		s.log.Info("Refusing update", "zone", origin, "reason", err.Error())
		return rcode(dns.RcodeRefused)
	}
	if next.Equal(z.set) {
		return rcode(dns.RcodeSuccess)
	}
	if !soaChanged {
		if next, err = bumpSerial(origin, recs, z.soa); err != nil {
			return rcode(dns.RcodeServerFailure)
		}
	}
	nz, err := compileZone(next)
	if err != nil {
		s.log.Info("Refusing update", "zone", origin, "reason", err.Error())
		return rcode(dns.RcodeRefused)
	}
	s.swap(func(zones map[string]*zone) { zones[nz.wire] = nz })
	s.log.V(1).Info("Updated zone", "zone", origin, "serial", next.Serial(), "key", tsig.Hdr.Name)
	return rcode(dns.RcodeSuccess)
}

// keyedRRsets are a zone's records by name and type.
type keyedRRsets map[dnsprovider.RRsetKey][]dns.RR

// keyedRRsets returns the zone's RRsets and their keys in the zone's order.
func (z *zone) keyedRRsets() (keyedRRsets, []dnsprovider.RRsetKey) {
	cur := keyedRRsets{}
	var order []dnsprovider.RRsetKey
	for _, rs := range z.set.RRsets() {
		k := dnsprovider.RRsetKey{Name: rs.Name, Type: rs.Type}
		cur[k] = rs.RRs
		order = append(order, k)
	}
	return cur, order
}

// inUse says whether any RRset of cur has name.
func (cur keyedRRsets) inUse(name string) bool {
	for k := range cur {
		if k.Name == name {
			return true
		}
	}
	return false
}

// checkPrerequisites checks the prerequisite section against the zone's
// RRsets (RFC 2136 section 3.2) and returns the rcode of the first one
// that fails, dns.RcodeSuccess when all hold.
func checkPrerequisites(prereqs []dns.RR, origin string, cur keyedRRsets) int {
	valueDep := keyedRRsets{}
	for _, rr := range prereqs {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		if h.Ttl != 0 {
			return dns.RcodeFormatError
		}
		if !dns.IsSubDomain(origin, name) {
			return dns.RcodeNotZone
		}
		k := dnsprovider.RRsetKey{Name: name, Type: h.Rrtype}
		switch h.Class {
		case dns.ClassANY:
			if h.Rdlength != 0 {
				return dns.RcodeFormatError
			}
			if h.Rrtype == dns.TypeANY {
				if !cur.inUse(name) {
					return dns.RcodeNameError
				}
			} else if cur[k] == nil {
				return dns.RcodeNXRrset
			}
		case dns.ClassNONE:
			if h.Rdlength != 0 {
				return dns.RcodeFormatError
			}
			if h.Rrtype == dns.TypeANY {
				if cur.inUse(name) {
					return dns.RcodeYXDomain
				}
			} else if cur[k] != nil {
				return dns.RcodeYXRrset
			}
		case dns.ClassINET:
			valueDep[k] = append(valueDep[k], rr)
		default:
			return dns.RcodeFormatError
		}
	}
	for k, want := range valueDep {
		if !sameRRs(cur[k], want) {
			return dns.RcodeNXRrset
		}
	}
	return dns.RcodeSuccess
}

// prescan checks the update section before anything is applied (RFC 2136
// section 3.4.1) and returns the rcode of the first record at fault,
// dns.RcodeSuccess when none is.
func prescan(updates []dns.RR, origin string) int {
	for _, rr := range updates {
		h := rr.Header()
		if !dns.IsSubDomain(origin, strings.ToLower(h.Name)) {
			return dns.RcodeNotZone
		}
		switch h.Class {
		case dns.ClassINET:
			if isMeta(h.Rrtype) || h.Rrtype == dns.TypeANY {
				return dns.RcodeFormatError
			}
		case dns.ClassANY:
			if h.Ttl != 0 || h.Rdlength != 0 || (isMeta(h.Rrtype) && h.Rrtype != dns.TypeANY) {
				return dns.RcodeFormatError
			}
		case dns.ClassNONE:
			if h.Ttl != 0 || isMeta(h.Rrtype) || h.Rrtype == dns.TypeANY {
				return dns.RcodeFormatError
			}
		default:
			return dns.RcodeFormatError
		}
	}
	return dns.RcodeSuccess
}

// applyUpdates applies the update section to a working copy of the
// zone's RRsets (RFC 2136 section 3.4.2) and returns it, and whether an
// update set a newer SOA. The apex SOA and NS are never deleted, the last
// apex NS never removed.
func applyUpdates(updates []dns.RR, z *zone, cur keyedRRsets) (keyedRRsets, bool) {
	origin := z.origin
	work := keyedRRsets{}
	for k, v := range cur {
		work[k] = v
	}
	apexProtected := func(k dnsprovider.RRsetKey) bool {
		return k.Name == origin && (k.Type == dns.TypeSOA || k.Type == dns.TypeNS)
	}
	soaChanged := false
	for _, rr := range updates {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		k := dnsprovider.RRsetKey{Name: name, Type: h.Rrtype}
		switch h.Class {
		case dns.ClassINET:
			add := dns.Copy(rr)
			add.Header().Name = name
			hasCNAME := work[dnsprovider.RRsetKey{Name: name, Type: dns.TypeCNAME}] != nil
			if h.Rrtype == dns.TypeCNAME && hasOtherThan(work, name, dns.TypeCNAME) || h.Rrtype != dns.TypeCNAME && hasCNAME {
				continue // RFC 2136: ignored
			}
			if h.Rrtype == dns.TypeSOA {
				if name != origin || !serialNewer(add.(*dns.SOA).Serial, z.soa.Serial) {
					continue
				}
				work[k] = []dns.RR{add}
				soaChanged = true
				continue
			}
			if h.Rrtype == dns.TypeCNAME {
				work[k] = []dns.RR{add}
				continue
			}
			var next []dns.RR
			for _, o := range work[k] {
				if !dns.IsDuplicate(o, add) {
					c := dns.Copy(o)
					c.Header().Ttl = h.Ttl // one TTL per RRset
					next = append(next, c)
				}
			}
			work[k] = append(next, add)
		case dns.ClassANY:
			if h.Rrtype == dns.TypeANY {
				for ok := range work {
					if ok.Name == name && !apexProtected(ok) {
						delete(work, ok)
					}
				}
			} else if !apexProtected(k) {
				delete(work, k)
			}
		case dns.ClassNONE:
			if k.Type == dns.TypeSOA && name == origin {
				continue
			}
			var next []dns.RR
			for _, o := range work[k] {
				c := dns.Copy(rr)
				c.Header().Class, c.Header().Ttl = dns.ClassINET, o.Header().Ttl
				if !dns.IsDuplicate(o, c) {
					next = append(next, o)
				}
			}
			if len(next) == 0 && apexProtected(k) {
				continue // never the last apex NS
			}
			if len(next) == 0 {
				delete(work, k)
			} else {
				work[k] = next
			}
		}
	}
	return work, soaChanged
}

// flatten turns RRsets back into flat records, in the original order
// (for stability), new RRsets after.
func flatten(work keyedRRsets, order []dnsprovider.RRsetKey) []dnsprovider.Record {
	var recs []dnsprovider.Record
	seen := map[dnsprovider.RRsetKey]bool{}
	emit := func(k dnsprovider.RRsetKey) {
		rrs := work[k]
		if seen[k] || len(rrs) == 0 {
			return
		}
		seen[k] = true
		r := dnsprovider.Record{Name: k.Name, Type: dns.TypeToString[k.Type], TTL: int32(rrs[0].Header().Ttl)}
		for _, rr := range rrs {
			r.Data = append(r.Data, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
		recs = append(recs, r)
	}
	for _, k := range order {
		emit(k)
	}
	for k := range work {
		emit(k)
	}
	return recs
}

// bumpSerial sets the SOA of recs to cur's serial plus one (RFC 1982
// arithmetic, never 0) and parses recs again.
func bumpSerial(origin string, recs []dnsprovider.Record, cur *dns.SOA) (*dnsprovider.RecordSet, error) {
	for i := range recs {
		if recs[i].Type == "SOA" {
			soa := dns.Copy(cur).(*dns.SOA)
			soa.Serial++
			if soa.Serial == 0 {
				soa.Serial = 1
			}
			recs[i].Data = []string{strings.TrimPrefix(soa.String(), soa.Header().String())}
		}
	}
	return dnsprovider.ParseRecords(origin, recs)
}

func isMeta(t uint16) bool {
	return t == dns.TypeOPT || t == 0 || t >= 128 && t <= 255
}

func hasOtherThan(work keyedRRsets, name string, t uint16) bool {
	for k, v := range work {
		if k.Name == name && k.Type != t && len(v) > 0 {
			return true
		}
	}
	return false
}

// sameRRs compares RRsets as sets of RDATA, ignoring TTLs.
func sameRRs(a, b []dns.RR) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range b {
		found := false
		for _, y := range a {
			c := dns.Copy(x)
			c.Header().Class, c.Header().Ttl = y.Header().Class, y.Header().Ttl
			c.Header().Name = y.Header().Name
			if dns.IsDuplicate(y, c) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// serialNewer reports whether a is newer than b in RFC 1982 arithmetic.
func serialNewer(a, b uint32) bool {
	return a != b && a-b < 1<<31
}
