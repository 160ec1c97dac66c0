package etcdtest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to one address. With Corrupt set it
// flips one byte inside a large gRPC response message of every server
// stream (a bit error the network let through, in the middle of a
// snapshot's data), leaving HTTP/2 framing and small messages intact.
// It understands only plaintext HTTP/2 (h2c), as gRPC without TLS uses.
type Proxy struct {
	// Addr is host:port to connect to instead of the target.
	Addr    string
	Corrupt atomic.Bool
	// Flipped counts bytes flipped so far.
	Flipped atomic.Int64
	target  string
	ln      net.Listener
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
}

// StartProxy listens on 127.0.0.1 and forwards to target; it stops when
// the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Close stops listening and cuts every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.track(in, true)
		p.track(out, true)
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(out, in)
			_ = out.Close()
		}()
		go func() {
			defer p.wg.Done()
			_ = p.copyResponses(in, out)
			_ = in.Close()
			p.track(in, false)
			p.track(out, false)
		}()
	}
}

// bigMessage: gRPC messages at least this large are snapshot chunks
// (etcd sends 32 KiB of database per message); status, member list and
// other answers are far smaller.
const bigMessage = 8 << 10

// flipAt is the offset inside a big message that is flipped: past the
// response header and remaining-bytes fields, inside the data blob.
const flipAt = 4 << 10

// copyResponses copies server-to-client HTTP/2 frames, tracking gRPC
// message boundaries per stream in DATA frames, and flips the byte at
// flipAt of the third big message of each stream while Corrupt is set.
func (p *Proxy) copyResponses(dst io.Writer, src io.Reader) error {
	type stream struct {
		hdr     []byte // partial 5-byte gRPC message prefix
		left    int    // bytes left in the current message
		off     int    // offset in the current message
		size    int
		big     int // big messages seen
		flipped bool
	}
	streams := map[uint32]*stream{}
	header := make([]byte, 9)
	for {
		if _, err := io.ReadFull(src, header); err != nil {
			return err
		}
		length := int(header[0])<<16 | int(header[1])<<8 | int(header[2])
		typ, flags := header[3], header[4]
		id := binary.BigEndian.Uint32(header[5:9]) & 0x7fffffff
		payload := make([]byte, length)
		if _, err := io.ReadFull(src, payload); err != nil {
			return err
		}
		if typ == 0 && id != 0 { // DATA
			data := payload
			if flags&0x8 != 0 && len(data) > 0 { // PADDED
				pad := int(data[0])
				if pad+1 > len(data) {
					return errors.New("bad padding")
				}
				data = data[1 : len(data)-pad]
			}
			s := streams[id]
			if s == nil {
				s = &stream{}
				streams[id] = s
			}
			for i := 0; i < len(data); {
				if s.left == 0 {
					s.hdr = append(s.hdr, data[i])
					i++
					if len(s.hdr) == 5 {
						s.size = int(binary.BigEndian.Uint32(s.hdr[1:5]))
						s.left, s.off, s.hdr = s.size, 0, s.hdr[:0]
						if s.size >= bigMessage {
							s.big++
						}
					}
					continue
				}
				n := min(s.left, len(data)-i)
				if p.Corrupt.Load() && !s.flipped && s.size >= bigMessage && s.big == 3 && s.off <= flipAt && flipAt < s.off+n {
					data[i+flipAt-s.off] ^= 0x01
					s.flipped = true
					p.Flipped.Add(1)
				}
				s.left -= n
				s.off += n
				i += n
			}
			if flags&0x1 != 0 { // END_STREAM
				delete(streams, id)
			}
		}
		if _, err := dst.Write(header); err != nil {
			return err
		}
		if _, err := dst.Write(payload); err != nil {
			return err
		}
	}
}
