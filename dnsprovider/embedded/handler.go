package embedded

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// tsigFudge is the time window (seconds) of the TSIG records we sign.
const tsigFudge = 300

// request is one message being served.
type request struct {
	raw  []byte
	src  netip.Addr
	tcp  bool
	send func([]byte) error
	st   *stats
}

// serve answers one request message: the fast path when it can, the full
// path otherwise. It never panics on malformed input.
func (s *Server) serve(r request, out []byte, lower *[256]byte) {
	snap := s.snap.Load()
	if n, rcode := snap.fastAnswer(r.raw, out, s.maxUDP, r.tcp, lower); n > 0 {
		r.st.response(rcode)
		_ = r.send(out[:n])
		return
	}
	s.serveFull(snap, r)
}

// serveFull parses the whole message with miekg/dns and handles every kind
// of request: queries the fast path leaves, transfers, updates, TSIG.
func (s *Server) serveFull(snap *snapshot, r request) {
	m := r.raw
	if len(m) < 12 || m[2]&0x80 != 0 {
		// Too short for a header, or a response: no answer, as any
		// answer could be used for reflection.
		r.st.drop()
		return
	}
	req := new(dns.Msg)
	if err := req.Unpack(m); err != nil {
		s.formErr(r, m)
		return
	}
	reqOpt, tsig, ok := checkExtra(req)
	if !ok || len(req.Question) != 1 || !completeQuestion(m) {
		s.formErr(r, m)
		return
	}
	var tsigErr error
	if tsig != nil {
		if len(s.keys) == 0 {
			tsigErr = dns.ErrSecret
		} else {
			tsigErr = dns.TsigVerifyWithProvider(m, s.keys, "", false)
		}
		if tsigErr != nil {
			s.sendTSIGError(r, req, tsig, tsigErr)
			return
		}
	}

	var resp *dns.Msg
	switch req.Opcode {
	case dns.OpcodeQuery:
		switch req.Question[0].Qtype {
		case dns.TypeAXFR, dns.TypeIXFR:
			if s.transfer(snap, r, req, tsig) {
				return
			}
			resp = new(dns.Msg).SetRcode(req, dns.RcodeRefused)
		default:
			resp = snap.answer(req)
		}
	case dns.OpcodeUpdate:
		resp = s.update(req, tsig)
	default:
		resp = new(dns.Msg).SetRcode(req, dns.RcodeNotImplemented)
	}
	s.finish(r, req, resp, reqOpt, tsig)
}

// completeQuestion reports whether the first question of m has its type
// and class: miekg/dns accepts a question cut short.
func completeQuestion(m []byte) bool {
	off := 12
	for off < len(m) {
		l := int(m[off])
		switch {
		case l == 0:
			return off+1+4 <= len(m)
		case l&0xc0 == 0xc0:
			return off+2+4 <= len(m)
		}
		off += 1 + l
	}
	return false
}

// checkExtra finds the OPT and TSIG records of a request. ok is false for
// more than one OPT or a TSIG that is not the last record (RFC 6891, 8945).
func checkExtra(req *dns.Msg) (opt *dns.OPT, tsig *dns.TSIG, ok bool) {
	for i, rr := range req.Extra {
		switch rr := rr.(type) {
		case *dns.OPT:
			if opt != nil || rr.Hdr.Name != "." {
				return nil, nil, false
			}
			opt = rr
		case *dns.TSIG:
			if i != len(req.Extra)-1 {
				return nil, nil, false
			}
			tsig = rr
		}
	}
	for _, rr := range append(req.Answer, req.Ns...) {
		if t := rr.Header().Rrtype; t == dns.TypeOPT || t == dns.TypeTSIG {
			return nil, nil, false
		}
	}
	return opt, tsig, true
}

// formErr answers a message that does not parse with its header only.
func (s *Server) formErr(r request, m []byte) {
	out := make([]byte, 12)
	copy(out, m[:4])
	out[2] = 0x80 | m[2]&0x78 // QR, opcode
	out[3] = dns.RcodeFormatError
	r.st.response(dns.RcodeFormatError)
	_ = r.send(out)
}

// finish applies EDNS, truncation and TSIG to a response and sends it.
func (s *Server) finish(r request, req, resp *dns.Msg, reqOpt *dns.OPT, tsig *dns.TSIG) {
	resp.Compress = true
	limit := dns.MaxMsgSize
	if reqOpt != nil {
		if reqOpt.Version() != 0 {
			resp.Answer, resp.Ns, resp.Extra = nil, nil, nil
			resp.Authoritative = false
			resp.Rcode = dns.RcodeBadVers
		}
		resp.SetEdns0(s.maxUDP, reqOpt.Do())
		if !r.tcp {
			limit = int(min(max(reqOpt.UDPSize(), dns.MinMsgSize), s.maxUDP))
		}
	} else if !r.tcp {
		limit = dns.MinMsgSize
	}
	if tsig != nil {
		limit -= tsigSize(tsig)
	}
	if resp.Len() > limit {
		truncate(resp, limit)
	}
	var data []byte
	var err error
	if tsig != nil {
		resp.SetTsig(tsig.Hdr.Name, tsig.Algorithm, tsigFudge, time.Now().Unix())
		data, _, err = dns.TsigGenerateWithProvider(resp, s.keys, tsig.MAC, false)
	} else {
		data, err = resp.Pack()
	}
	if err != nil {
		// Nothing we build should fail to pack; answer SERVFAIL.
		fail := new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
		if data, err = fail.Pack(); err != nil {
			r.st.drop()
			return
		}
		resp = fail
	}
	r.st.response(resp.Rcode)
	_ = r.send(data)
}

// tsigSize bounds the size of the TSIG record we add to a response.
func tsigSize(t *dns.TSIG) int {
	return len(t.Hdr.Name) + len(t.Algorithm) + 2 + 10 + 16 + 64 + 8
}

// truncate makes resp fit limit: first drop additional data, then
// authority data; if the answer itself does not fit, send no records with
// TC set so that the client retries over TCP (RFC 2181 section 9).
func truncate(resp *dns.Msg, limit int) {
	opt := resp.IsEdns0()
	keepOpt := func() {
		resp.Extra = nil
		if opt != nil {
			resp.Extra = []dns.RR{opt}
		}
	}
	keepOpt()
	if resp.Len() <= limit {
		return
	}
	resp.Ns = nil
	if resp.Len() <= limit {
		return
	}
	resp.Answer = nil
	resp.Truncated = true
}

// sendTSIGError answers a request whose TSIG did not verify (RFC 8945
// section 5.2): NOTAUTH with the TSIG error, signed only for BADTIME.
func (s *Server) sendTSIGError(r request, req *dns.Msg, tsig *dns.TSIG, verr error) {
	resp := new(dns.Msg).SetRcode(req, dns.RcodeNotAuth)
	t := &dns.TSIG{
		Hdr:        dns.RR_Header{Name: tsig.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm:  tsig.Algorithm,
		Fudge:      tsig.Fudge,
		TimeSigned: tsig.TimeSigned,
		OrigId:     req.Id,
	}
	switch {
	case errors.Is(verr, dns.ErrTime):
		t.Error = dns.RcodeBadTime
		now := uint64(time.Now().Unix())
		t.TimeSigned = now
		other := make([]byte, 6)
		binary.BigEndian.PutUint16(other, uint16(now>>32))
		binary.BigEndian.PutUint32(other[2:], uint32(now))
		t.OtherData = fmtHex(other)
		t.OtherLen = 6
	case errors.Is(verr, dns.ErrSig):
		t.Error = dns.RcodeBadSig
	default:
		t.Error = dns.RcodeBadKey
	}
	resp.Extra = append(resp.Extra, t)
	data, _, err := dns.TsigGenerateWithProvider(resp, s.keys, tsig.MAC, false)
	if err != nil {
		// BADTIME with a key we know always signs; anything else packs
		// unsigned. Fall back to an unsigned NOTAUTH.
		resp.Extra = nil
		if data, err = resp.Pack(); err != nil {
			r.st.drop()
			return
		}
	}
	r.st.response(dns.RcodeNotAuth)
	_ = r.send(data)
}

func fmtHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&0xf])
	}
	return string(out)
}

// axfrMsgSize is the size a transfer message is filled to.
const axfrMsgSize = 16 * 1024

// transfer serves AXFR (and IXFR as a full transfer) over TCP to allowed
// clients or TSIG-signed requests. It returns false when the request is
// refused and the caller must answer.
func (s *Server) transfer(snap *snapshot, r request, req *dns.Msg, tsig *dns.TSIG) bool {
	q := req.Question[0]
	wire, err := wireName(q.Name)
	if err != nil {
		return false
	}
	z := snap.zones[wire]
	if z == nil || q.Qclass != dns.ClassINET {
		return false
	}
	if tsig == nil && !s.transferAllowed(r.src) {
		return false
	}
	if !r.tcp {
		if q.Qtype != dns.TypeIXFR {
			return false
		}
		// IXFR over UDP: the SOA alone tells the client to use TCP
		// (RFC 1995 section 2).
		resp := new(dns.Msg).SetReply(req)
		resp.Authoritative = true
		resp.Answer = []dns.RR{z.soa}
		reqOpt, _, _ := checkExtra(req)
		s.finish(r, req, resp, reqOpt, tsig)
		return true
	}
	rrs := z.set.RRs() // SOA first
	rrs = append(rrs, z.soa)
	mac := ""
	if tsig != nil {
		mac = tsig.MAC
	}
	first := true
	for len(rrs) > 0 {
		resp := new(dns.Msg).SetReply(req)
		resp.Authoritative = true
		resp.Compress = true
		if !first {
			resp.Question = nil
		}
		size := 12
		if first {
			size += len(q.Name) + 6
		}
		n := 0
		for n < len(rrs) && (n == 0 || size+dns.Len(rrs[n]) <= axfrMsgSize) {
			size += dns.Len(rrs[n])
			n++
		}
		resp.Answer, rrs = rrs[:n], rrs[n:]
		var data []byte
		var err error
		if tsig != nil {
			resp.SetTsig(tsig.Hdr.Name, tsig.Algorithm, tsigFudge, time.Now().Unix())
			data, mac, err = dns.TsigGenerateWithProvider(resp, s.keys, mac, !first)
		} else {
			data, err = resp.Pack()
		}
		if err != nil {
			r.st.drop()
			return true
		}
		if first {
			r.st.response(dns.RcodeSuccess)
		}
		if r.send(data) != nil {
			return true
		}
		first = false
	}
	return true
}

func (s *Server) transferAllowed(src netip.Addr) bool {
	src = src.Unmap()
	for _, p := range s.cfg.TransferAllow {
		if p.Contains(src) {
			return true
		}
	}
	return false
}
