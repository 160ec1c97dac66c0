package localenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// setupCgroups creates the environment's cgroup tree:
// etcdfed-<slot>/<cluster>/{infra,<zone>...}.
func (e *Env) setupCgroups() error {
	fs, err := proc.Cgroup2Root()
	if err != nil {
		return err
	}
	root := filepath.Join(fs, fmt.Sprintf("etcdfed-%d", e.state.Slot))
	if err := proc.RemoveCgroupTree(root); err != nil {
		return err
	}
	for _, c := range e.state.Clusters() {
		if err := proc.EnsureCgroup(filepath.Join(root, c.Name, "infra")); err != nil {
			return err
		}
		for _, z := range c.Zones {
			if err := proc.EnsureCgroup(filepath.Join(root, c.Name, z.Name)); err != nil {
				return err
			}
		}
	}
	e.cgfs, e.cgroot = fs, root
	return nil
}

// cgroupDir is the cgroup of a cluster's part ("infra" or a zone), or ""
// without cgroups.
func (e *Env) cgroupDir(cluster, part string) string {
	if e.cgroot == "" {
		return ""
	}
	return filepath.Join(e.cgroot, cluster, part)
}

func (e *Env) startAgent(c ClusterState) error {
	var nodes []nodeagent.Node
	var nodeIPs []net.IP
	for _, z := range c.Zones {
		for _, n := range z.Nodes {
			nodeIPs = append(nodeIPs, net.ParseIP(n.IP))
			nodes = append(nodes, nodeagent.Node{
				Name: n.Name, Zone: z.Name, IP: netip.MustParseAddr(n.IP),
				PodIPs: nodeagent.IPRange{First: netip.MustParseAddr(n.PodIPFirst), Last: netip.MustParseAddr(n.PodIPLast)},
				Labels: map[string]string{corev1LabelRegion: c.Name},
			})
		}
	}
	var mark uint32
	var network nodeagent.PodNetwork
	if e.part != nil {
		mark = e.part.mark
		if !e.cfg.SharedSourceAddress {
			network = e.part
		}
	}
	kubelet, err := e.kubeletServing(c.Name, nodeIPs)
	if err != nil {
		return err
	}
	a, err := nodeagent.New(nodeagent.Config{
		ClusterName: c.Name,
		REST:        e.pki.restConfig(c.APIServer),
		Nodes:       nodes,
		BinDir:      e.bin,
		StateDir:    filepath.Join(e.state.clusterDir(c.Name), "node"),
		PIDDir:      e.state.pidDir(),
		DNSServers:  e.state.dnsServersFor(c),
		Cgroup: func(zone string) string {
			return e.cgroupDir(c.Name, zone)
		},
		Mark:        mark,
		Network:     network,
		BackoffBase: e.cfg.BackoffBase,
		BackoffMax:  e.cfg.BackoffMax,
		Kubelet:     kubelet,
		// Zero is kubelet's default.
		NodeLeaseDuration: e.cfg.NodeLeaseDuration,
		Log:               e.log.WithName("nodeagent").WithValues("cluster", c.Name),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &agentRun{agent: a, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		if err := a.Run(ctx); err != nil {
			e.log.Error(err, "Node agent stopped", "cluster", c.Name)
		}
	}()
	e.mu.Lock()
	e.agents[c.Name] = run
	e.mu.Unlock()
	return nil
}

// kubeletServing is what a member cluster's node agent serves pods/log
// with: a certificate for its node IPs, and the environment's CA for the
// apiserver's client certificate.
func (e *Env) kubeletServing(cluster string, nodeIPs []net.IP) (*nodeagent.KubeletServing, error) {
	certFile, keyFile, err := e.pki.kubeletServingCert(cluster, nodeIPs)
	if err != nil {
		return nil, fmt.Errorf("localenv: kubelet certificate of %s: %w", cluster, err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("localenv: kubelet certificate of %s: %w", cluster, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.pki.caPEM)
	return &nodeagent.KubeletServing{Port: addr.KubeletPort, Certificate: cert, ClientCAs: pool}, nil
}

// corev1LabelRegion is topology.kubernetes.io/region: a member cluster is
// a region of its own.
const corev1LabelRegion = "topology.kubernetes.io/region"

func (e *Env) stopAgent(name string, crash bool) {
	e.mu.Lock()
	run := e.agents[name]
	delete(e.agents, name)
	e.mu.Unlock()
	if run == nil {
		return
	}
	if crash {
		run.agent.Crash()
	}
	run.cancel()
	<-run.done
}

// CanPartition returns nil when ModePartition works here, else why not.
func (e *Env) CanPartition() error { return e.partErr }

// UnitCgroup returns the cgroup v2 directory and the address block of a
// unit (a member cluster or a zone; partition.go): a process started in a
// cgroup below the directory, listening on an address of the block, is
// inside the unit for partitions and distances, as the unit's pods are
// (benchmarks run plain etcd processes there as a baseline). Process
// nodes with cgroups only.
func (e *Env) UnitCgroup(name string) (dir, cidr string, err error) {
	if e.cgroot == "" {
		return "", "", fmt.Errorf("localenv: no cgroups here: %w", e.partErr)
	}
	u, ok := e.state.unit(name, e.cgroot)
	if !ok || name == HubClusterName {
		return "", "", fmt.Errorf("localenv: no member cluster or zone %q (units: %s)", name, strings.Join(e.state.unitNames(), ", "))
	}
	return u.Cgroup, u.CIDR, nil
}

// SharedSourceAddress returns "" when every pod connects to its peers
// from its own pod IP, as on a real node. Otherwise every pod's
// connections come from 127.0.0.1, and it returns one line saying why and
// what that means: etcd peers that check a client certificate against the
// connection's source address reject each other, so EtcdClusters here
// need spec.tls.peerSkipClientSANVerification.
func (e *Env) SharedSourceAddress() string {
	const instead = "pods connect to each other from 127.0.0.1, so etcd's check of a peer's address against its certificate cannot pass: EtcdClusters here need spec.tls.peerSkipClientSANVerification: true"
	switch {
	case e.cfg.SharedSourceAddress:
		return "pods share one source address as configured (shared source address mode): " + instead
	case e.partErr != nil:
		return fmt.Sprintf("cannot give pods their own source address (%v): %s; zones fail by killing processes only (--mode kill)", e.partErr, instead)
	}
	return ""
}

// StopNodeLeases stops (stop true) or resumes the renewal of the node
// Leases of one zone of a member cluster while everything else runs on:
// what the hub sees when a zone's kubelets lose their apiserver while the
// machines and their pods are fine. With real nodes the zone's nodes are
// cut off from their cluster's apiserver (realleases.go).
func (e *Env) StopNodeLeases(cluster, zone string, stop bool) error {
	if e.state.Real() {
		return e.cutRealNodeLeases(cluster, zone, stop)
	}
	a := e.Agent(cluster)
	if a == nil {
		return fmt.Errorf("localenv: member cluster %q has no running node agent", cluster)
	}
	return a.StopNodeLeases(zone, stop)
}
