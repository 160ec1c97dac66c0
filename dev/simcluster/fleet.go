package simcluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/etcdsim"
)

// Fleet is the simulated etcd of every simulated member cluster in this
// process: one ring per EtcdCluster.
type Fleet struct {
	srv *etcdsim.Server

	mu    sync.Mutex
	rings map[string]*fleetRing // by EtcdCluster UID
}

type fleetRing struct {
	ring  *etcdsim.Ring
	token string
}

// NewFleet starts an empty fleet; Close stops every member.
func NewFleet() *Fleet {
	return &Fleet{srv: etcdsim.NewServer(), rings: map[string]*fleetRing{}}
}

// Close stops every simulated member.
func (f *Fleet) Close() { f.srv.Close() }

// Rings is the number of rings formed so far.
func (f *Fleet) Rings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.rings)
}

// Ring is the simulated ring of the EtcdCluster with this UID (nil when
// none formed).
func (f *Fleet) Ring(uid string) *etcdsim.Ring {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fr := f.rings[uid]; fr != nil {
		return fr.ring
	}
	return nil
}

// errNotSimulated: a bootstrap the simulation cannot run.
var errNotSimulated = errors.New("not simulated")

// memberFor is the ring and the member ID an EtcdMember's process runs as,
// as etcd finds them from its flags: a founding member (initial cluster
// state new) founds the ring when it is the first of its token to start;
// a joining member (existing) is the member the hub added with its peer
// URL.
func (f *Fleet) memberFor(m *etcdfedv1.EtcdMember, peerURL string) (*etcdsim.Ring, uint64, error) {
	b := m.Spec.Bootstrap
	if b.Restore != nil || m.Spec.ForceNewCluster != "" {
		return nil, 0, fmt.Errorf("a restore from a snapshot or force-new-cluster: %w", errNotSimulated)
	}
	uid := m.Spec.Cluster.UID
	f.mu.Lock()
	defer f.mu.Unlock()
	fr := f.rings[uid]
	if b.InitialClusterState == etcdfedv1.InitialClusterNew && (fr == nil || fr.token != b.Token) {
		var specs []etcdsim.MemberSpec
		for _, kv := range strings.Split(b.InitialCluster, ",") {
			name, url, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return nil, 0, fmt.Errorf("initial cluster %q: entry %q is not name=peerURL", b.InitialCluster, kv)
			}
			specs = append(specs, etcdsim.MemberSpec{Name: name, PeerURL: url, Stopped: true})
		}
		if fr != nil {
			fr.ring.Close()
		}
		r, err := f.srv.NewRing(etcdsim.RingOptions{Name: m.Spec.Cluster.Namespace + "-" + m.Spec.Cluster.Name, Members: specs})
		if err != nil {
			return nil, 0, fmt.Errorf("found ring: %w", err)
		}
		fr = &fleetRing{ring: r, token: b.Token}
		f.rings[uid] = fr
	}
	if fr == nil {
		return nil, 0, fmt.Errorf("etcd exits: no cluster %s/%s to join (no founding member started)", m.Spec.Cluster.Namespace, m.Spec.Cluster.Name)
	}
	mi, ok := fr.ring.MemberByPeerURL(peerURL)
	if !ok {
		return nil, 0, fmt.Errorf("etcd exits: member with peer URL %s not found in the cluster", peerURL)
	}
	return fr.ring, mi.ID, nil
}

// forget drops the ring of a deleted EtcdCluster once none of its members
// runs.
func (f *Fleet) forget(uid string) {
	f.mu.Lock()
	fr := f.rings[uid]
	if fr == nil {
		f.mu.Unlock()
		return
	}
	for _, mi := range fr.ring.Members() {
		if mi.Running {
			f.mu.Unlock()
			return
		}
	}
	delete(f.rings, uid)
	f.mu.Unlock()
	fr.ring.Close()
}

// serverTLS is the member's serving configuration from its TLS Secret,
// with client certificates required, as etcd's --client-cert-auth.
func serverTLS(ca, cert, key []byte) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("load member certificate: %w", err)
	}
	pool, err := certPool(ca)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}
