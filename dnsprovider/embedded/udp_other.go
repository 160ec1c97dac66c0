//go:build !linux

package embedded

import (
	"errors"
	"net"
	"net/netip"
	"time"
)

// serveUDP answers one datagram per system call.
func (s *Server) serveUDP(c *net.UDPConn, st *stats) {
	defer s.wg.Done()
	in := make([]byte, 65535)
	out := make([]byte, 65535)
	var lower [256]byte
	var src netip.AddrPort
	send := func(b []byte) error {
		if s.rrl != nil {
			if b = s.limit(b, src.Addr(), time.Now().UnixNano(), st); b == nil {
				return nil
			}
		}
		_, err := c.WriteToUDPAddrPort(b, src)
		return err
	}
	for {
		n, from, err := c.ReadFromUDPAddrPort(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		src = from
		s.serve(request{raw: in[:n], src: from.Addr(), send: send, st: st}, out, &lower)
	}
}
