package etcdsim

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
)

// StartMember starts the "process" of a member (one added by MemberAdd,
// or one stopped): its listener opens, and it publishes its name and
// client URLs once it reaches the leader, as etcd does.
func (r *Ring) StartMember(id uint64, o StartOptions) (MemberInfo, error) {
	r.mu.Lock()
	m := r.find(id)
	if m == nil {
		r.mu.Unlock()
		return MemberInfo{}, fmt.Errorf("start %x: %w", id, ErrUnknownMember)
	}
	if m.running {
		r.mu.Unlock()
		return MemberInfo{}, fmt.Errorf("start %x: already running", id)
	}
	r.mu.Unlock()
	l, err := r.listen(m, o)
	if err != nil {
		return MemberInfo{}, err
	}
	r.mu.Lock()
	if r.closed || m.running || r.find(id) == nil {
		r.mu.Unlock()
		_ = l.ln.Close()
		return MemberInfo{}, fmt.Errorf("start %x: ring closed, member removed or started meanwhile", id)
	}
	r.attachLocked(m, l)
	r.electLocked()
	r.mu.Unlock()
	for _, mi := range r.Members() {
		if mi.ID == id {
			return mi, nil
		}
	}
	return MemberInfo{}, fmt.Errorf("start %x: %w", id, ErrUnknownMember)
}

// listening is a member's listener opened, not serving yet.
type listening struct {
	ln        net.Listener
	cfg       *tls.Config
	name      string
	clientURL string
	version   string
}

// listen opens m's listener (m does not run: nothing else touches it).
func (r *Ring) listen(m *member, o StartOptions) (*listening, error) {
	addr := o.ListenAddr
	if addr == "" {
		addr = m.listenAddr
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	cfg := o.TLS
	if cfg == nil {
		cfg = m.tls
	}
	if cfg == nil {
		cfg = r.opts.TLS
	}
	cfg = serverTLS(cfg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for member %x: %w", m.id, err)
	}
	l := &listening{ln: ln, cfg: cfg, name: o.Name, clientURL: o.ClientURL, version: o.Version}
	if l.name == "" {
		l.name = fmt.Sprintf("%s-%x", r.opts.Name, m.id)
	}
	if l.clientURL == "" {
		scheme := "http"
		if cfg != nil {
			scheme = "https"
		}
		l.clientURL = scheme + "://" + ln.Addr().String()
	}
	return l, nil
}

// attachLocked makes m run on l; its name and client URL are published
// once it reaches the leader (electLocked), the first time only.
func (r *Ring) attachLocked(m *member, l *listening) {
	m.ln, m.tls, m.listenAddr = l.ln, l.cfg, l.ln.Addr().String()
	if l.version != "" {
		m.version = l.version
	}
	m.connMu.Lock()
	m.conns = map[net.Conn]struct{}{}
	m.connMu.Unlock()
	m.running, m.paused, m.startedAt, m.activeSince = true, false, time.Now(), time.Now()
	m.startIndex = r.index
	m.grpcS, m.grpcL = newGRPC(), newChanListener()
	go func(gs *grpc.Server, l *chanListener) { _ = gs.Serve(l) }(m.grpcS, m.grpcL)
	if m.name == "" {
		m.pendingName, m.pendingClientURLs = l.name, []string{l.clientURL}
	}
	go r.acceptLoop(m, l.ln, l.cfg, m.grpcL)
}

func (r *Ring) acceptLoop(m *member, ln net.Listener, cfg *tls.Config, grpcL *chanListener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go r.srv.serveConn(r, m, c, cfg, grpcL)
	}
}

// track records a live connection of m, false when m no longer runs.
func (m *member) track(c net.Conn) bool {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if m.conns == nil {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

// stopLocked closes m's listener and every connection it accepted, as a
// process that dies.
func (r *Ring) stopLocked(m *member) {
	if conns, gs := r.detachLocked(m); gs != nil {
		for c := range conns {
			_ = c.Close()
		}
		go gs.Stop()
	}
}

// stopGracefullyLocked stops m as etcd stops a member that applied its own
// removal: the listener closes, gRPC clients get GOAWAY (the calls under
// way, such as the removal itself, answer first), HTTP connections close.
func (r *Ring) stopGracefullyLocked(m *member) {
	if conns, gs := r.detachLocked(m); gs != nil {
		go func() {
			gs.GracefulStop()
			for c := range conns {
				_ = c.Close()
			}
		}()
	}
}

func (r *Ring) detachLocked(m *member) (map[net.Conn]struct{}, *grpc.Server) {
	if !m.running {
		return nil, nil
	}
	m.running, m.paused = false, false
	_ = m.ln.Close()
	_ = m.grpcL.Close()
	gs := m.grpcS
	m.ln, m.grpcS, m.grpcL = nil, nil, nil
	m.connMu.Lock()
	conns := m.conns
	m.conns = nil
	m.connMu.Unlock()
	return conns, gs
}

// StopMember kills a member's "process": its listener refuses, its
// connections close; its membership stays.
func (r *Ring) StopMember(id uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.find(id)
	if m == nil {
		return fmt.Errorf("stop %x: %w", id, ErrUnknownMember)
	}
	r.stopLocked(m)
	r.electLocked()
	return nil
}
