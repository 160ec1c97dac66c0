// Package etcdstatus reads a member's own view of itself (member ID, learner
// or not, leader, raft index and term, database size, version, alarms, and
// which raft peers it is connected to) from its etcd, over TLS with the
// member's own certificate as client certificate and the member's DNS name
// as server name.
//
// A Reader keeps one etcd client per member and replaces it when the
// endpoint or the credentials change.
package etcdstatus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/etcddial"
	"github.com/etcdfed/etcdfed/internal/text"
)

// ErrBadCredentials wraps errors about the member's TLS Secret content.
var ErrBadCredentials = errors.New("etcdstatus: bad TLS credentials")

// DefaultTimeout bounds one status read.
const DefaultTimeout = 3 * time.Second

// Target is one member's etcd.
type Target struct {
	// Endpoint is the member's client URL at its pod IP, such as
	// https://10.0.0.5:2379.
	Endpoint string
	// ServerName is the name its serving certificate is checked against
	// (the member's DNS name).
	ServerName string
	// CA, Cert and Key are PEM data from the member's TLS Secret; all empty
	// when TLS is disabled.
	CA, Cert, Key []byte
	// Version identifies the credentials (the Secret's resourceVersion), so
	// a changed Secret replaces the client.
	Version string
}

// Reader reads member status; safe for concurrent use.
type Reader struct {
	// Timeout bounds one read; 0 means DefaultTimeout.
	Timeout time.Duration
	// DiskWarmup is how long a member's syncs are left out of its disk
	// view after its etcd started; 0 means DiskWarmup.
	DiskWarmup time.Duration

	mu      sync.Mutex
	clients map[string]*entry
}

type entry struct {
	endpoint, version string
	cli               *clientv3.Client
	// metrics reads /metrics on the same endpoint with the same
	// credentials (peer and disk views).
	metrics *memberMetrics
}

// memberMetrics reads one member's /metrics and keeps its disk readings.
type memberMetrics struct {
	http *http.Client
	mu   sync.Mutex
	disk DiskReadings
}

// addDisk records a reading of the member's WAL sync histogram and late
// heartbeats and returns the window's view.
func (m *memberMetrics) addDisk(now time.Time, read Metrics) *etcdfedv1.MemberDiskView {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.disk.Add(now, read)
}

// Read returns the member's view of itself. key names the member (for
// example namespace/name). The returned view has ObservedAt set; on error
// the view is nil.
func (r *Reader) Read(ctx context.Context, key string, t Target) (*etcdfedv1.MemberEtcdView, error) {
	cli, metrics, err := r.client(key, t)
	if err != nil {
		return nil, err
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := cli.Status(ctx, t.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("read status of %s: %w", t.Endpoint, err)
	}
	now := metav1.Now()
	v := &etcdfedv1.MemberEtcdView{
		ID:          hexID(st.Header.GetMemberId()),
		IsLearner:   st.IsLearner,
		RaftIndex:   int64(st.RaftIndex),
		RaftTerm:    int64(st.RaftTerm),
		Revision:    st.Header.GetRevision(),
		DBSize:      st.DbSize,
		DBSizeInUse: st.DbSizeInUse,
		Version:     st.Version,
		ObservedAt:  &now,
	}
	if st.Leader != 0 {
		v.LeaderID = hexID(st.Leader)
	}
	if len(st.Errors) > 0 {
		v.Error = text.Truncate(strings.Join(st.Errors, "; "), 1024)
	}
	// The peer and disk views are best effort: a member whose metrics
	// cannot be read has neither (and is no zone witness), its status read
	// stands.
	if m, err := readMetrics(ctx, metrics.http, t.Endpoint, v.ID); err == nil {
		v.Peers = m.Peers
		v.WALFsync = metrics.addDisk(now.Time, m)
	}
	return v, nil
}

// Forget closes and drops the member's client.
func (r *Reader) Forget(key string) {
	r.mu.Lock()
	e := r.clients[key]
	delete(r.clients, key)
	r.mu.Unlock()
	if e != nil {
		e.close()
	}
}

// Close closes every client.
func (r *Reader) Close() {
	r.mu.Lock()
	clients := r.clients
	r.clients = nil
	r.mu.Unlock()
	for _, e := range clients {
		e.close()
	}
}

func (r *Reader) client(key string, t Target) (*clientv3.Client, *memberMetrics, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.clients[key]; e != nil {
		if e.endpoint == t.Endpoint && e.version == t.Version {
			return e.cli, e.metrics, nil
		}
		e.close()
		delete(r.clients, key)
	}
	transport := &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext, MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute}
	cfg := clientv3.Config{
		Endpoints:            []string{t.Endpoint},
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
		DialOptions:          []grpc.DialOption{etcddial.Reconnect(2 * time.Second)},
	}
	if strings.HasPrefix(t.Endpoint, "https://") {
		tc, err := TLSConfig(t.CA, t.Cert, t.Key, t.ServerName)
		if err != nil {
			return nil, nil, err
		}
		cfg.TLS = tc
		transport.TLSClientConfig = tc.Clone()
		// gRPC checks the server against the dial authority (the pod IP),
		// overriding tls.Config.ServerName; pin the member's DNS name.
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithTransportCredentials(
			serverNameCreds{TransportCredentials: credentials.NewTLS(tc), name: t.ServerName}))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for %s: %w", t.Endpoint, err)
	}
	if r.clients == nil {
		r.clients = map[string]*entry{}
	}
	e := &entry{endpoint: t.Endpoint, version: t.Version, cli: cli, metrics: &memberMetrics{http: &http.Client{Transport: transport}, disk: DiskReadings{Warmup: r.DiskWarmup}}}
	r.clients[key] = e
	return cli, e.metrics, nil
}

func (e *entry) close() {
	_ = e.cli.Close()
	e.metrics.http.CloseIdleConnections()
}

// TLSConfig builds a client TLS configuration from PEM data: ca verifies the
// server, whose certificate must carry serverName; cert and key are the
// client certificate.
func TLSConfig(ca, cert, key []byte, serverName string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%w: ca.crt holds no PEM certificate", ErrBadCredentials)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("%w: tls.crt and tls.key: %w", ErrBadCredentials, err)
	}
	return &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{pair},
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// serverNameCreds verifies the server against a fixed name whatever the
// dial authority is.
type serverNameCreds struct {
	credentials.TransportCredentials
	name string
}

func (c serverNameCreds) ClientHandshake(ctx context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ClientHandshake(ctx, c.name, conn)
}

func (c serverNameCreds) Clone() credentials.TransportCredentials {
	return serverNameCreds{TransportCredentials: c.TransportCredentials.Clone(), name: c.name}
}

func hexID(id uint64) string { return strconv.FormatUint(id, 16) }
