package localenv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ctnetlink, the little of it that forgetting one UDP flow takes (from
// linux/netfilter/nfnetlink_conntrack.h).
const (
	ipctnlMsgCtDelete = 2
	ctaTupleOrig      = 1
	ctaTupleIP        = 1
	ctaTupleProto     = 2
	ctaIPv4Src        = 1
	ctaIPv4Dst        = 2
	ctaProtoNum       = 1
	ctaProtoSrcPort   = 2
	ctaProtoDstPort   = 3
)

// forgetUDPFlow deletes the conntrack entry of the UDP flow from -> to
// (its original direction), if there is one. nat decides once per
// entry, and a flow that never pauses (gossip between two spokes, from
// port 7946 to port 7946) would keep the way it was given before a
// distance was set for as long as it runs; forgotten, its next datagram
// meets the rules in place.
func forgetUDPFlow(from, to netip.AddrPort) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("conntrack: netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("conntrack: bind: %w", err)
	}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2})

	attr := func(typ uint16, payload []byte) []byte {
		b := make([]byte, 4, 4+len(payload)+3)
		binary.NativeEndian.PutUint16(b[0:2], uint16(4+len(payload)))
		binary.NativeEndian.PutUint16(b[2:4], typ)
		b = append(b, payload...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	nested := func(typ uint16, children ...[]byte) []byte {
		var p []byte
		for _, c := range children {
			p = append(p, c...)
		}
		return attr(typ|unix.NLA_F_NESTED, p)
	}
	port := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	src, dst := from.Addr().As4(), to.Addr().As4()
	tuple := nested(ctaTupleOrig,
		nested(ctaTupleIP, attr(ctaIPv4Src, src[:]), attr(ctaIPv4Dst, dst[:])),
		nested(ctaTupleProto, attr(ctaProtoNum, []byte{unix.IPPROTO_UDP}), attr(ctaProtoSrcPort, port(from.Port())), attr(ctaProtoDstPort, port(to.Port()))),
	)
	// nlmsghdr, nfgenmsg (family, version, res_id), the tuple.
	msg := make([]byte, 16+4, 16+4+len(tuple))
	binary.NativeEndian.PutUint16(msg[4:6], unix.NFNL_SUBSYS_CTNETLINK<<8|ipctnlMsgCtDelete)
	binary.NativeEndian.PutUint16(msg[6:8], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:12], 1)
	msg[16], msg[17] = unix.AF_INET, unix.NFNETLINK_V0
	msg = append(msg, tuple...)
	binary.NativeEndian.PutUint32(msg[0:4], uint32(len(msg)))
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("conntrack: send: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("conntrack: receive: %w", err)
	}
	if n < 20 || binary.NativeEndian.Uint16(buf[4:6]) != unix.NLMSG_ERROR {
		return errors.New("conntrack: no acknowledgement")
	}
	switch code := -int32(binary.NativeEndian.Uint32(buf[16:20])); syscall.Errno(code) {
	case 0, unix.ENOENT: // forgotten, or never there
		return nil
	default:
		return fmt.Errorf("conntrack: delete %s -> %s: %w", from, to, syscall.Errno(code))
	}
}
