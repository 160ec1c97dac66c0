package etcdcluster

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/reports"
)

// clientCache keeps one etcd client per EtcdCluster, replaced when the
// endpoints or certificates change, and the ring's memory of members that
// did not answer, which outlives the clients. A client no pass used for
// idleAfter is closed (sweep, on the hub's clock; and get, before it
// dials): rings at rest are visited once per resyncPeriod, and
// holding their connections (one per member, each pinged every 10 s) would
// cost every ring's connections all the time for a dial per visit saved.
type clientCache struct {
	mu      sync.Mutex
	clients map[types.UID]*cachedClient
	probes  map[types.UID]*etcdops.ProbeMemory
	// idleAfter closes clients unused for that long (0: never). It must
	// exceed the longest pass: a pass's client is never closed under it.
	idleAfter time.Duration
	now       func() time.Time
}

type cachedClient struct {
	key      string
	client   *etcdops.Client
	lastUsed time.Time
}

// closeIdle closes the clients no pass used for idleAfter, but uid's.
func (c *clientCache) closeIdle(uid types.UID, now time.Time) {
	if c.idleAfter <= 0 {
		return
	}
	for id, cc := range c.clients {
		if id != uid && now.Sub(cc.lastUsed) > c.idleAfter {
			_ = cc.client.Close()
			delete(c.clients, id)
			metricEtcdIdleClosed.Inc()
		}
	}
}

// sweep closes every client no pass used for idleAfter. At rest no pass
// comes (the hub passes over a ring on change), so get alone would close
// nothing: the hub's sweeper (sweepIdleClients) calls this on a clock.
func (c *clientCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	c.closeIdle("", now)
	metricEtcdClients.Set(float64(len(c.clients)))
}

// sweepIdleClients closes idle etcd clients every quarter of their idle
// time until ctx is done (a manager Runnable).
func (r *Reconciler) sweepIdleClients(ctx context.Context) error {
	if r.etcd.idleAfter <= 0 {
		return nil
	}
	t := time.NewTicker(r.etcd.idleAfter / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.etcd.sweep()
		}
	}
}

// clientTLS is the hub's client TLS configuration for one EtcdCluster and
// a fingerprint of the certificates it holds.
type clientTLS struct {
	cfg         *tls.Config
	fingerprint string
}

// get is the ring uid's client for endpoints, dialled with t (nil: plain
// HTTP) and checkAddr (nil: every address; the hub's is dialPolicy).
func (c *clientCache) get(uid types.UID, endpoints []string, t *clientTLS, checkAddr func(netip.Addr) error) (*etcdops.Client, error) {
	key := strings.Join(endpoints, ",")
	cfg := etcdops.Config{Endpoints: endpoints, CheckAddr: checkAddr}
	if t != nil {
		key += "|" + t.fingerprint
		cfg.TLS = t.cfg
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients == nil {
		c.clients = map[types.UID]*cachedClient{}
	}
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	c.closeIdle(uid, now)
	if cc, ok := c.clients[uid]; ok {
		if cc.key == key {
			cc.lastUsed = now
			metricEtcdClients.Set(float64(len(c.clients)))
			return cc.client, nil
		}
		_ = cc.client.Close()
		delete(c.clients, uid)
	}
	metricEtcdClients.Set(float64(len(c.clients)))
	cl, err := etcdops.New(cfg)
	if err != nil {
		return nil, err
	}
	metricEtcdDials.Inc()
	if c.probes == nil {
		c.probes = map[types.UID]*etcdops.ProbeMemory{}
	}
	if c.probes[uid] == nil {
		c.probes[uid] = &etcdops.ProbeMemory{}
	}
	cl.Probes = c.probes[uid]
	c.clients[uid] = &cachedClient{key: key, client: cl, lastUsed: now}
	metricEtcdClients.Set(float64(len(c.clients)))
	return cl, nil
}

func (c *clientCache) drop(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.clients[uid]; ok {
		_ = cc.client.Close()
		delete(c.clients, uid)
	}
	metricEtcdClients.Set(float64(len(c.clients)))
	delete(c.probes, uid)
}

func fingerprint(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// awsMetadataV6 is the instance metadata service's IPv6 address on AWS.
var awsMetadataV6 = netip.MustParseAddr("fd00:ec2::254")

// dialPolicy is what the hub refuses to dial for a ring (rule 14): the
// addresses hub/reports refuses in a member's report (unspecified,
// multicast, link-local such as the cloud metadata service's
// 169.254.169.254, broadcast; loopback unless the hub runs with
// --allow-loopback-member-addresses) and fd00:ec2::254. It holds for every
// endpoint, the members' DNS names and spec.adopt.endpoints alike, after
// name resolution: a name that resolves there is refused too.
func dialPolicy(allowLoopback bool) func(netip.Addr) error {
	return func(ip netip.Addr) error {
		if ip.Unmap() == awsMetadataV6 {
			return errors.New("a cloud metadata service's address")
		}
		return reports.CheckIP(ip, allowLoopback)
	}
}
