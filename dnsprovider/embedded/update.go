package embedded

import "github.com/miekg/dns"

// update handles an RFC 2136 UPDATE.
func (s *Server) update(req *dns.Msg, tsig *dns.TSIG) *dns.Msg {
	return new(dns.Msg).SetRcode(req, dns.RcodeRefused)
}
