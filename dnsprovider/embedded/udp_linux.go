//go:build linux

package embedded

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// udpBatch is how many datagrams one recvmmsg/sendmmsg moves.
	udpBatch = 32
	// udpInSize bounds a request datagram; longer ones (which no DNS
	// client sends over UDP) are dropped.
	udpInSize = 8192
)

// mmsghdr is struct mmsghdr of recvmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// batch is the memory of one recvmmsg or sendmmsg call.
type batch struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for IPv4 and IPv6
	bufs  [][]byte
}

func newBatch(n, size int) *batch {
	b := &batch{
		hdrs:  make([]mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n),
		bufs:  make([][]byte, n),
	}
	for i := range n {
		b.bufs[i] = make([]byte, size)
		b.hdrs[i].hdr.Iov = &b.iovs[i]
		b.hdrs[i].hdr.SetIovlen(1)
		b.hdrs[i].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	}
	return b
}

// serveUDP moves datagrams in batches: one recvmmsg takes every request
// waiting (up to udpBatch), one sendmmsg sends their answers.
func (s *Server) serveUDP(c *net.UDPConn, st *stats) {
	defer s.wg.Done()
	_ = c.SetReadBuffer(4 << 20)
	_ = c.SetWriteBuffer(4 << 20)
	rc, err := c.SyscallConn()
	if err != nil {
		s.log.Error(err, "UDP socket without raw access")
		return
	}
	in := newBatch(udpBatch, udpInSize)
	out := newBatch(udpBatch, int(s.maxUDP))
	var lower [256]byte
	var answer []byte
	send := func(b []byte) error { answer = b; return nil }
	for {
		n, err := recvBatch(rc, in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EBADF) {
				return
			}
			continue
		}
		k := 0
		var now int64
		if s.rrl != nil {
			now = time.Now().UnixNano() // one clock read per batch
		}
		for i := range n {
			h := &in.hdrs[i]
			if h.hdr.Flags&unix.MSG_TRUNC != 0 {
				st.drop()
				continue
			}
			answer = nil
			s.serve(request{raw: in.bufs[i][:h.len], src: sockaddrAddr(&in.names[i]), send: send, st: st}, out.bufs[k], &lower)
			if len(answer) == 0 {
				continue
			}
			if s.rrl != nil {
				if answer = s.limit(answer, sockaddrAddr(&in.names[i]), now, st); answer == nil {
					continue
				}
			}
			out.iovs[k].Base = &answer[0]
			out.iovs[k].SetLen(len(answer))
			out.names[k] = in.names[i]
			out.hdrs[k].hdr.Namelen = h.hdr.Namelen
			k++
		}
		if k > 0 {
			if err := sendBatch(rc, out, k); err != nil && errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}
}

func recvBatch(rc syscall.RawConn, b *batch) (int, error) {
	for i := range b.hdrs {
		b.hdrs[i].hdr.Namelen = unix.SizeofSockaddrInet6
		b.hdrs[i].hdr.Flags = 0
		b.hdrs[i].len = 0
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(len(b.bufs[i]))
	}
	var n int
	var serr error
	err := rc.Read(func(fd uintptr) bool {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(len(b.hdrs)), 0, 0, 0)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false
		}
		if e != 0 {
			serr = e
		}
		n = int(r)
		return true
	})
	if err != nil {
		return 0, err
	}
	return n, serr
}

func sendBatch(rc syscall.RawConn, b *batch, k int) error {
	sent := 0
	var serr error
	err := rc.Write(func(fd uintptr) bool {
		for sent < k {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[sent])), uintptr(k-sent), 0, 0, 0)
			switch {
			case e == unix.EAGAIN:
				return false
			case e == unix.EINTR:
				continue
			case e != 0:
				// The first datagram failed (bad address, no buffer):
				// skip it, as a lost UDP answer would be.
				serr = e
				sent++
			default:
				sent += int(r)
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return serr
}

// sockaddrAddr reads the address of a struct sockaddr_in or sockaddr_in6.
func sockaddrAddr(sa *unix.RawSockaddrInet6) netip.Addr {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrFrom4(sa4.Addr)
	case unix.AF_INET6:
		return netip.AddrFrom16(sa.Addr).Unmap()
	}
	return netip.Addr{}
}
