package multicluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/cli/install"
)

// HandWrittenEtcd is an etcd cluster made of hand-written pods (no hub).
type HandWrittenEtcd struct {
	Namespace string
	Domain    string
	Members   []EtcdMember
	// Client reaches every member by its DNS name.
	Client EtcdClientConfig
}

// MemberClient is a config for one member's endpoint only.
func (h *HandWrittenEtcd) MemberClient(name string) EtcdClientConfig {
	c := h.Client
	c.Endpoints = []string{ClientURL(name, h.Domain)}
	return c
}

// Names lists the member names.
func (h *HandWrittenEtcd) Names() []string {
	var out []string
	for _, m := range h.Members {
		out = append(out, m.Name)
	}
	return out
}

// HandWrittenEtcdSpecInput is the input of HandWrittenEtcdSpec.
type HandWrittenEtcdSpecInput struct {
	T        testing.TB
	Topology *Topology
	// Namespace in every member cluster (created when missing).
	Namespace string
	// Domain of the member names, for example "etcd.test.".
	Domain string
	// Members: one per member cluster (in the cluster's first zone) when
	// empty.
	Members []EtcdMember
	// Workload runs this long against the new cluster (default 5s).
	Workload time.Duration
}

// HandWrittenEtcdSpec starts an etcd cluster of hand-written pods whose
// peer URLs are DNS names served by the ring's DNS: all members at once
// with initial-cluster-state new, records published as soon as the pods
// have addresses (etcd retries resolving its own name for a while at first
// start). It waits for a healthy cluster, runs a recorded client workload
// and checks it (linearizable, no acknowledged write lost, watches complete
// and in order).
func HandWrittenEtcdSpec(ctx context.Context, in HandWrittenEtcdSpecInput) *HandWrittenEtcd {
	t := in.T
	t.Helper()
	topo := in.Topology
	if topo.PublishRecords == nil {
		t.Skip("HandWrittenEtcdSpec: the topology cannot publish DNS records")
	}
	members := in.Members
	if len(members) == 0 {
		for i, c := range topo.Members {
			zones, err := c.Zones(ctx)
			if err != nil || len(zones) == 0 {
				t.Fatalf("zones of %s: %v %v", c.Name, zones, err)
			}
			members = append(members, EtcdMember{Name: fmt.Sprintf("etcd-%d", i), Cluster: c, Zone: zones[0]})
		}
	}
	h := &HandWrittenEtcd{Namespace: in.Namespace, Domain: in.Domain, Members: members}
	var names []string
	for _, m := range members {
		names = append(names, m.Name)
		h.Client.Endpoints = append(h.Client.Endpoints, ClientURL(m.Name, in.Domain))
	}
	h.Client.DNSServers = topo.DNSServers

	start := time.Now()
	for _, m := range members {
		ns := &metav1.ObjectMeta{Name: in.Namespace}
		if err := ensureNamespace(ctx, m.Cluster, ns.Name); err != nil {
			t.Fatal(err)
		}
		pod, claim := EtcdPod(EtcdPodInput{Member: m, Namespace: in.Namespace, Domain: in.Domain,
			InitialCluster: names, State: "new", Token: "hand-written-" + in.Namespace})
		if _, err := m.Cluster.Clientset.CoreV1().PersistentVolumeClaims(in.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatalf("claim of %s: %v", m.Name, err)
		}
		if _, err := m.Cluster.Clientset.CoreV1().Pods(in.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("pod %s: %v", m.Name, err)
		}
	}
	records := map[string]string{}
	for _, m := range members {
		pod, err := WaitForPodIP(ctx, WaitForPodInput{Cluster: m.Cluster, Namespace: in.Namespace, Name: m.Name})
		if err != nil {
			t.Fatal(err)
		}
		if err := WaitForMemberInZone(ctx, WaitForMemberInZoneInput{Cluster: m.Cluster, Namespace: in.Namespace, Pod: m.Name, Zone: m.Zone}); err != nil {
			t.Fatal(err)
		}
		records[m.Name] = pod.Status.PodIP
	}
	if err := topo.PublishRecords(ctx, in.Domain, records); err != nil {
		t.Fatalf("publish records: %v", err)
	}
	for name, ip := range records {
		if err := WaitForRecordResolves(ctx, WaitForRecordResolvesInput{Servers: topo.DNSServers, Name: MemberHost(name, in.Domain), Address: ip}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("records published %.1fs after the pods were created: %v", time.Since(start).Seconds(), records)
	for _, m := range members {
		if _, err := WaitForPodReady(ctx, WaitForPodInput{Cluster: m.Cluster, Namespace: in.Namespace, Name: m.Name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := WaitForEtcdMembers(ctx, WaitForEtcdMembersInput{Config: h.Client, Members: names}); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd cluster of %d members across %d clusters healthy %.1fs after the pods were created", len(members), len(topo.Members), time.Since(start).Seconds())

	w := StartWorkload(ctx, t, StartWorkloadInput{Client: h.Client, Prefix: "bootstrap/", WatchEachEndpoint: true})
	sleepCtx(ctx, orDefault(in.Workload, 5*time.Second))
	w.Stop()
	checkWorkload(ctx, t, w)
	return h
}

// ZoneFailureUnderLoadSpecInput is the input of ZoneFailureUnderLoadSpec.
type ZoneFailureUnderLoadSpecInput struct {
	T        testing.TB
	Topology *Topology
	Etcd     *HandWrittenEtcd
	// Victim is the member whose zone fails.
	Victim string
	// Mode is "kill" or "partition".
	Mode string
}

// ZoneFailureUnderLoadSpec fails the zone of one member while a recorded
// workload runs against all members: writes must go on with the remaining
// quorum; after the zone is restored the member must rejoin, and the whole
// history must be linearizable with no acknowledged write lost and the
// watches (one per endpoint too) complete and in order. It logs
// the longest gap between acknowledged writes.
func ZoneFailureUnderLoadSpec(ctx context.Context, in ZoneFailureUnderLoadSpecInput) {
	t := in.T
	t.Helper()
	topo := in.Topology
	if topo.FailZone == nil {
		t.Skip("ZoneFailureUnderLoadSpec: the topology cannot fail zones")
	}
	if in.Mode == "partition" && topo.CanPartition != nil {
		t.Skipf("ZoneFailureUnderLoadSpec: partitions unavailable here: %v", topo.CanPartition)
	}
	var victim EtcdMember
	for _, m := range in.Etcd.Members {
		if m.Name == in.Victim {
			victim = m
		}
	}
	if victim.Name == "" {
		t.Fatalf("no member %q", in.Victim)
	}
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: in.Etcd.Client, Prefix: "zonefail-" + in.Mode + "/", WatchEachEndpoint: true})
	must := fatalOnError(t)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	must(w.WaitForProgress(pctx, 50))
	cancel()

	failStart := time.Now()
	must(topo.FailZone(ctx, victim.Zone, in.Mode))
	t.Logf("failed zone %s (%s) of member %s in %.2fs", victim.Zone, in.Mode, victim.Name, time.Since(failStart).Seconds())
	must(WaitForEndpointUnreachable(ctx, in.Etcd.MemberClient(victim.Name), time.Minute))
	pctx, cancel = context.WithTimeout(ctx, time.Minute)
	must(w.WaitForProgress(pctx, 100)) // the remaining quorum takes writes
	cancel()
	t.Logf("writes continued without %s: %d acknowledged so far", victim.Name, w.Acked())

	restoreStart := time.Now()
	must(topo.RestoreZone(ctx, victim.Zone))
	must(WaitForEtcdMembers(ctx, WaitForEtcdMembersInput{Config: in.Etcd.Client, Members: in.Etcd.Names()}))
	t.Logf("member %s healthy again %.1fs after the zone was restored", victim.Name, time.Since(restoreStart).Seconds())
	pctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	must(w.WaitForProgress(pctx, 50))
	cancel()
	w.Stop()
	t.Logf("longest gap between acknowledged writes: %s", w.MaxWriteGap().Round(time.Millisecond))
	checkWorkload(ctx, t, w)
}

func ensureNamespace(ctx context.Context, c *Cluster, name string) error {
	_, err := c.Clientset.CoreV1().Namespaces().Create(ctx, namespaceObject(name), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s in %s: %w", name, c.Name, err)
	}
	if c.OnNamespace != nil {
		if err := c.OnNamespace(ctx, name); err != nil {
			return fmt.Errorf("namespace %s in %s: %w", name, c.Name, err)
		}
	}
	return nil
}

// grantHubSecrets lets the hub write consumer Secrets in namespace ns of
// member cluster c, as docs/certificates.md tells a user to: the hub's
// credentials in a member cluster (`etcdfed cluster join`) reach only the
// ring namespace.
func grantHubSecrets(ctx context.Context, c *Cluster, ns string) error {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "etcdfed-hub-clients", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update", "delete"}}}}
	if _, err := c.Clientset.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("role %s/%s in %s: %w", ns, role.Name, c.Name, err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "etcdfed-hub-clients", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: install.Namespace, Name: "etcdfed-hub"}}}
	if _, err := c.Clientset.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("role binding %s/%s in %s: %w", ns, rb.Name, c.Name, err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
