package etcdcluster

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdfed/etcdfed/hub/etcdops"
)

// clientCache keeps one etcd client per EtcdCluster, replaced when the
// endpoints or certificates change, and the ring's memory of members that
// did not answer, which outlives the clients.
type clientCache struct {
	mu      sync.Mutex
	clients map[types.UID]*cachedClient
	probes  map[types.UID]*etcdops.ProbeMemory
}

type cachedClient struct {
	key    string
	client *etcdops.Client
}

// clientTLS is the hub's client TLS configuration for one EtcdCluster and
// a fingerprint of the certificates it holds.
type clientTLS struct {
	cfg         *tls.Config
	fingerprint string
}

func (c *clientCache) get(uid types.UID, endpoints []string, t *clientTLS) (*etcdops.Client, error) {
	key := strings.Join(endpoints, ",")
	cfg := etcdops.Config{Endpoints: endpoints}
	if t != nil {
		key += "|" + t.fingerprint
		cfg.TLS = t.cfg
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients == nil {
		c.clients = map[types.UID]*cachedClient{}
	}
	if cc, ok := c.clients[uid]; ok {
		if cc.key == key {
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
	c.clients[uid] = &cachedClient{key: key, client: cl}
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
