package embedded

import "encoding/binary"

// query is what the fast path reads from a standard query.
type query struct {
	qend    int    // end of the question section
	wire    []byte // lowercase question name, wire format
	qtype   uint16
	edns    bool
	do      bool
	udpSize uint16
}

// parseSimple reads a plain query without allocating: QR=0, opcode QUERY,
// one question of class IN with an uncompressed name, no answer or
// authority records, and at most an EDNS version 0 OPT record in the
// additional section. ok is false for anything else; the full path handles
// those.
func parseSimple(m []byte, lower *[256]byte) (q query, ok bool) {
	if len(m) < 17 {
		return q, false
	}
	if m[2]&0xf8 != 0 { // QR and opcode
		return q, false
	}
	if binary.BigEndian.Uint16(m[4:]) != 1 || binary.BigEndian.Uint16(m[6:]) != 0 || binary.BigEndian.Uint16(m[8:]) != 0 {
		return q, false
	}
	arcount := binary.BigEndian.Uint16(m[10:])
	if arcount > 1 {
		return q, false
	}
	off := 12
	n := 0
	for {
		if off >= len(m) {
			return q, false
		}
		l := int(m[off])
		if l > 63 { // compression pointer or extended label type
			return q, false
		}
		if off+1+l > len(m) || n+1+l > 255 {
			return q, false
		}
		lower[n] = byte(l)
		for i := 1; i <= l; i++ {
			c := m[off+i]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[n+i] = c
		}
		n += 1 + l
		off += 1 + l
		if l == 0 {
			break
		}
	}
	if off+4 > len(m) {
		return q, false
	}
	q.wire = lower[:n]
	q.qtype = binary.BigEndian.Uint16(m[off:])
	if binary.BigEndian.Uint16(m[off+2:]) != 1 { // class IN
		return q, false
	}
	off += 4
	q.qend = off
	if arcount == 1 {
		// OPT: root name, type 41, class = UDP size, TTL = ext rcode,
		// version, flags; then RDATA.
		if off+11 > len(m) || m[off] != 0 || binary.BigEndian.Uint16(m[off+1:]) != 41 {
			return q, false
		}
		if m[off+6] != 0 { // EDNS version
			return q, false
		}
		q.edns = true
		q.udpSize = binary.BigEndian.Uint16(m[off+3:])
		q.do = m[off+7]&0x80 != 0
		rdlen := int(binary.BigEndian.Uint16(m[off+9:]))
		off += 11 + rdlen
	}
	if off != len(m) {
		return q, false
	}
	// Meta types, OPT and the zero type go the full path.
	if q.qtype == 0 || q.qtype == 41 || q.qtype >= 128 && q.qtype <= 255 {
		return q, false
	}
	return q, true
}

// fastAnswer writes the answer to a plain query into out and returns its
// length; 0 means the full path must answer (unknown shape, a zone the
// fast path has no answer for, or an answer too large for limit).
func (s *snapshot) fastAnswer(m []byte, out []byte, maxUDP uint16, tcp bool, lower *[256]byte) (int, int) {
	q, ok := parseSimple(m, lower)
	if !ok {
		return 0, 0
	}
	z := s.findZone(q.wire)
	if z == nil {
		return 0, 0
	}
	var p *prepared
	var nxdomain bool
	if n := z.nodes[string(q.wire)]; n != nil {
		if p = n.prepared(q.qtype); p == nil {
			return 0, 0
		}
	} else {
		nxdomain = true
	}

	limit := 512
	switch {
	case tcp:
		limit = 65535
	case q.edns:
		limit = int(min(max(q.udpSize, 512), maxUDP))
	}
	var v *variant
	if nxdomain {
		v = &z.nxVariant
	} else {
		// The first form that fits, as truncate would cut it.
		for i := range p.variants {
			size := q.qend + len(p.variants[i].body)
			if q.edns {
				size += 11
			}
			if size <= limit {
				v = &p.variants[i]
				break
			}
		}
		if v == nil {
			return 0, 0
		}
	}
	body, rcode, an, ns, ar := v.body, v.rcode, v.ancount, v.nscount, v.arcount
	size := q.qend + len(body)
	if q.edns {
		size += 11
		ar++
	}
	if size > limit || size > len(out) {
		return 0, 0
	}
	copy(out, m[:q.qend])
	out[2] = 0x84 | m[2]&0x01 // QR, AA, RD copied
	if v.tc {
		out[2] |= 0x02
	}
	out[3] = m[3]&0x10 | byte(rcode) // CD copied
	binary.BigEndian.PutUint16(out[4:], 1)
	binary.BigEndian.PutUint16(out[6:], an)
	binary.BigEndian.PutUint16(out[8:], ns)
	binary.BigEndian.PutUint16(out[10:], ar)
	o := q.qend
	o += copy(out[o:], body)
	if nxdomain {
		ptr := 12 + len(q.wire) - len(z.wire)
		out[q.qend] = 0xc0 | byte(ptr>>8)
		out[q.qend+1] = byte(ptr)
	}
	if q.edns {
		out[o] = 0
		binary.BigEndian.PutUint16(out[o+1:], 41)
		binary.BigEndian.PutUint16(out[o+3:], maxUDP)
		out[o+5], out[o+6] = 0, 0
		out[o+7], out[o+8] = 0, 0
		if q.do {
			out[o+7] = 0x80
		}
		out[o+9], out[o+10] = 0, 0
		o += 11
	}
	return o, rcode
}
