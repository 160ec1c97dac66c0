package workload

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdfed/etcdfed/internal/etcddial"
	"github.com/etcdfed/etcdfed/internal/resolverenv"
)

// Resolver returns a resolver that asks the given DNS servers (host:port)
// as the local environment's processes do (resolverenv): each query to
// all of them, the first answer that is not REFUSED wins, so a spoke that
// does not serve the ring's zone, or one that is down, costs nothing; the
// system resolver when there are none.
func Resolver(servers []string) *net.Resolver {
	if len(servers) == 0 {
		return net.DefaultResolver
	}
	return resolverenv.NewResolver(servers)
}

// ClientConfig says how to reach an etcd cluster.
type ClientConfig struct {
	// Endpoints are client URLs, typically with the members' DNS names.
	Endpoints []string
	// DNSServers resolve the endpoints' names; empty: the system resolver.
	DNSServers []string
	// TLS for https endpoints.
	TLS *tls.Config
	// DialTimeout; default 2s.
	DialTimeout time.Duration
}

// Endpoint is the configuration for one endpoint only.
func (c ClientConfig) Endpoint(endpoint string) ClientConfig {
	c.Endpoints = []string{endpoint}
	return c
}

// NewClient returns an etcd client that resolves every endpoint through
// the configured DNS servers at each dial, as etcd's own peers do.
func NewClient(cfg ClientConfig) (*clientv3.Client, error) {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	res := Resolver(cfg.DNSServers)
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := net.Dialer{Resolver: res, Timeout: cfg.DialTimeout}
		return d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// A partitioned member drops packets silently: keepalives let the
		// client notice and balance away from it (10s is grpc's minimum).
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		TLS:                  cfg.TLS,
		// Reconnect within 2 s of a member coming back (gRPC's own back-off
		// grows to 2 minutes): a watcher pinned to one member's endpoint,
		// whose cluster was down for minutes, resumes once its name
		// answers again instead of long after the scenario ended.
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial), etcddial.Reconnect(cfg.DialTimeout)},
		Logger:      zap.NewNop(),
	})
}
