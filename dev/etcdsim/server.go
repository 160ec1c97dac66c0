package etcdsim

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
)

// Server hosts any number of simulated rings in this process. Every
// simulated member has a listener and a gRPC server of its own (so that
// a member stopping gracefully sends its clients GOAWAY, as etcd does); one
// HTTP server serves /version and /health for all of them. A connection a
// member accepts carries the member it came to, and every call is routed
// by it.
type Server struct {
	http  *http.Server
	httpL *chanListener

	mu     sync.Mutex
	rings  []*Ring
	closed bool
	wg     sync.WaitGroup
}

// NewServer starts the shared HTTP server. Close stops it and every ring.
func NewServer() *Server {
	s := &Server{httpL: newChanListener()}
	s.http = &http.Server{
		Handler:           httpHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*simConn); ok {
				return context.WithValue(ctx, connKey{}, sc.info)
			}
			return ctx
		},
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = s.http.Serve(s.httpL) }()
	return s
}

// newGRPC is one member's gRPC server, as etcd's: pings every 5 s at
// most, the message sizes etcd accepts by default.
func newGRPC() *grpc.Server {
	g := grpc.NewServer(
		grpc.Creds(simCreds{}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Hour, Timeout: 20 * time.Second}),
		grpc.MaxRecvMsgSize(1536*1024+512*1024),
		// Small buffers, the write buffer released when idle: a fleet holds
		// thousands of idle connections.
		grpc.ReadBufferSize(4*1024), grpc.WriteBufferSize(4*1024),
	)
	pb.RegisterClusterServer(g, clusterService{})
	pb.RegisterMaintenanceServer(g, maintenanceService{})
	pb.RegisterKVServer(g, kvService{})
	pb.RegisterAuthServer(g, authService{})
	return g
}

// Close stops every ring's members and the shared server.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	rings := slices.Clone(s.rings)
	s.mu.Unlock()
	for _, r := range rings {
		r.Close()
	}
	_ = s.http.Close()
	s.wg.Wait()
}

// memberOf is the member (and its ring) that accepted the call's
// connection, and the caller's identity.
func memberOf(ctx context.Context) (*connInfo, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, errors.New("etcdsim: call without a peer")
	}
	ci, ok := p.AuthInfo.(*connInfo)
	if !ok {
		return nil, errors.New("etcdsim: call on a connection no simulated member accepted")
	}
	return ci, nil
}

type connKey struct{}

// connInfo is what a connection carries from the member's listener to the
// shared servers.
type connInfo struct {
	credentials.CommonAuthInfo
	ring   *Ring
	member *member
	// commonName is the client certificate's common name (TLS), etcd's
	// user name for the connection when authentication is on.
	commonName string
}

func (*connInfo) AuthType() string { return "etcdsim" }

// simConn is a connection a member accepted (decrypted when TLS).
type simConn struct {
	net.Conn
	r    *bufio.Reader
	info *connInfo
}

func (c *simConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// simCreds lets the gRPC server take connections whose TLS handshake the
// member's listener did already, and hands each call the member.
type simCreds struct{}

func (simCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("etcdsim: server credentials only")
}

func (simCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	sc, ok := c.(*simConn)
	if !ok {
		return nil, nil, fmt.Errorf("etcdsim: connection of type %T", c)
	}
	return sc, sc.info, nil
}

func (simCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "etcdsim"}
}
func (s simCreds) Clone() credentials.TransportCredentials { return s }
func (simCreds) OverrideServerName(string) error           { return nil }

// chanListener is a net.Listener fed by the members' accept loops.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// http2Preface starts every HTTP/2 (gRPC) connection; anything else is
// HTTP/1 (/version, /health), as etcd's client port serves both.
const http2Preface = "PRI * HTTP/2.0"

// serveConn completes the TLS handshake, tells gRPC from HTTP/1 and hands
// the connection to the member's gRPC server (through grpcL) or the shared
// HTTP server. It runs on its own goroutine.
func (s *Server) serveConn(r *Ring, m *member, raw net.Conn, tlsCfg *tls.Config, grpcL *chanListener) {
	c := raw
	info := &connInfo{ring: r, member: m, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	if tlsCfg != nil {
		tc := tls.Server(raw, tlsCfg)
		if err := tc.Handshake(); err != nil {
			_ = raw.Close()
			return
		}
		st := tc.ConnectionState()
		if len(st.PeerCertificates) > 0 {
			info.commonName = st.PeerCertificates[0].Subject.CommonName
		}
		info.SecurityLevel = credentials.PrivacyAndIntegrity
		c = tc
	}
	br := bufio.NewReaderSize(c, 4096)
	head, err := br.Peek(len(http2Preface))
	if err != nil && len(head) == 0 {
		_ = c.Close()
		return
	}
	_ = raw.SetDeadline(time.Time{})
	sc := &simConn{Conn: c, r: br, info: info}
	if !m.track(sc) {
		_ = c.Close()
		return
	}
	l := s.httpL
	if string(head) == http2Preface {
		l = grpcL
	}
	if !l.push(sc) {
		_ = c.Close()
	}
}

// serverTLS is cfg with the ALPN protocols etcd's client port offers
// (gRPC clients insist on h2).
func serverTLS(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		return nil
	}
	c := cfg.Clone()
	if len(c.NextProtos) == 0 {
		c.NextProtos = []string{"h2", "http/1.1"}
	}
	return c
}
