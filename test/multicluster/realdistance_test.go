package multicluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
)

// podEnds are two member pods of a ring in two member clusters, by
// cluster and address.
type podEnds struct {
	aCluster, bCluster string
	a, b               netip.Addr
}

// memberPodsIn returns the address of one member pod in cluster a and
// one in cluster b.
func memberPodsIn(ctx context.Context, t *testing.T, topo *Topology, etcd *ManagedEtcd, a, b string) podEnds {
	t.Helper()
	ec, err := etcd.Get(ctx, topo.Hub)
	if err != nil {
		t.Fatal(err)
	}
	ends := podEnds{aCluster: a, bCluster: b}
	for _, m := range ec.Status.Members {
		if m.Cluster != a && m.Cluster != b {
			continue
		}
		p, err := memberCluster(t, topo, m.Cluster).Clientset.CoreV1().Pods(etcdfedv1.DefaultRingNamespace).Get(ctx, etcd.ObjectName(m.Name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			t.Fatalf("member %s's pod has no address: %v", m.Name, err)
		}
		if m.Cluster == a && !ends.a.IsValid() {
			ends.a = ip
		} else if m.Cluster == b && !ends.b.IsValid() {
			ends.b = ip
		}
	}
	if !ends.a.IsValid() || !ends.b.IsValid() {
		t.Fatalf("no member pod in %s or %s: %+v", a, b, ec.Status.Members)
	}
	return ends
}

// podRoundTrips opens a listener in pod b's network namespace, connects
// to it from pod a's (the sockets live there: the traffic leaves a's
// pod, crosses its node and the environment's network, and enters b's
// pod as the members' does), and times n one-byte echoes over that one
// connection. It returns the round trips and the address b saw the
// connection come from.
func podRoundTrips(t *testing.T, env *localenv.Env, e podEnds, n int) ([]time.Duration, netip.Addr) {
	t.Helper()
	nsA, err := env.PodNetns(e.aCluster, e.a)
	if err != nil {
		t.Fatal(err)
	}
	nsB, err := env.PodNetns(e.bCluster, e.b)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := realnode.InNetnsPath(nsB, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(e.b, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan netip.Addr, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(seen)
			return
		}
		defer c.Close()
		seen <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		_, _ = io.Copy(c, c)
	}()
	var c net.Conn
	if err := realnode.InNetnsPath(nsA, func() (err error) {
		c, err = net.DialTimeout("tcp4", ln.Addr().String(), 10*time.Second)
		return err
	}); err != nil {
		t.Fatalf("connect from %s to %s: %v", e.a, ln.Addr(), err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	var out []time.Duration
	b := []byte{0}
	for range n {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatalf("echo from %s: %v", ln.Addr(), err)
		}
		out = append(out, time.Since(start))
	}
	return out, <-seen
}

func showRTTs(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("min %s median %s max %s", s[0].Round(10*time.Microsecond), s[len(s)/2].Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond))
}

// distanceBetweenPods: a round trip between two member pods of two
// member clusters of real nodes takes at least the round trip set
// between the clusters, and the receiving pod sees the sender's pod
// address (etcd checks a peer's certificate against it); the ring stays
// ready through it. It leaves the distance it set in place.
func distanceBetweenPods(ctx context.Context, t *testing.T, topo *Topology, env *localenv.Env, etcd *ManagedEtcd) {
	ends := memberPodsIn(ctx, t, topo, etcd, "member-1", "member-2")
	if err := env.SetDistance(ctx, localenv.Distance{}); err != nil {
		t.Fatal(err)
	}
	zero, from := podRoundTrips(t, env, ends, 20)
	t.Logf("round trips %s -> %s at zero distance: %s (seen from %s)", ends.a, ends.b, showRTTs(zero), from)
	d, err := localenv.ParseDistance("member-1:member-2=20ms")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.SetDistance(ctx, d); err != nil {
		t.Fatal(err)
	}
	far, from := podRoundTrips(t, env, ends, 20)
	t.Logf("round trips %s -> %s at 20ms: %s (seen from %s)", ends.a, ends.b, showRTTs(far), from)
	if m := slices.Min(far); m < 20*time.Millisecond {
		t.Errorf("a round trip between member-1 and member-2 at 20ms took %s", m)
	}
	if from != ends.a {
		t.Errorf("member-2's pod saw the connection from %s, want member-1's pod %s", from, ends.a)
	}
	back, from := podRoundTrips(t, env, podEnds{aCluster: ends.bCluster, bCluster: ends.aCluster, a: ends.b, b: ends.a}, 5)
	if m := slices.Min(back); m < 20*time.Millisecond || from != ends.b {
		t.Errorf("member-2 to member-1 at 20ms: %s, seen from %s (want %s)", showRTTs(back), from, ends.b)
	}
	// Through the ring's own peers: every member ready with its peers'
	// connections across the proxy (a peer rejected by its address
	// would leave the ring without quorum across the pair).
	if _, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name,
		Replicas: 5, Tolerant: true, Timeout: 3 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "real-distance/"})
	progress(ctx, t, w, 50, time.Minute)
	w.Stop()
	checkWorkload(ctx, t, w)
	st := env.Status().Distance
	if st == nil || st.Proxied == 0 {
		t.Errorf("no connection through the delay proxy: %+v", st)
	} else {
		t.Logf("distance %s: %d connections and flows through the proxy %v", st.Spec, st.Proxied, st.Routes)
	}
}

// leaderPodDeletedAtDistance sets dist between the member clusters and
// deletes the leader's pod under the recorded workload (its preStop hook
// moves leadership first), logging the longest write gap; then sets the
// distance back to none.
func leaderPodDeletedAtDistance(ctx context.Context, t *testing.T, topo *Topology, env *localenv.Env, etcd *ManagedEtcd, dist string, roundTrip time.Duration) {
	d, err := localenv.ParseDistance(dist)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.SetDistance(ctx, d); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.SetDistance(ctx, localenv.Distance{}); err != nil {
			t.Error(err)
		}
	}()
	ec, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: topo.Hub, Namespace: etcd.Namespace, Name: etcd.Name,
		Replicas: 5, Tolerant: true, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	spokesSeeDistance(ctx, t, topo, env, etcd, roundTrip)
	w := StartWorkload(ctx, t, StartWorkloadInput{Client: etcd.Client, Prefix: "real-leader-far/", WatchEachEndpoint: true})
	waitForWorkloadProgress(ctx, t, w)
	calm, _ := w.MaxWriteGapAt()
	leader := ec.Status.Leader
	var logs *etcdLog
	for _, m := range ec.Status.Members {
		if m.Name == leader {
			logs = followEtcdLog(ctx, t, memberCluster(t, topo, m.Cluster), etcd.ObjectName(leader))
		}
	}
	start := time.Now()
	PodDeletedSpec(ctx, PodDeletedSpecInput{T: t, Topology: topo, Etcd: etcd, Member: leader})
	back := time.Since(start)
	progress(ctx, t, w, 20, 30*time.Second)
	if logs != nil {
		checkStoppedAsFollower(t, "leader "+leader+"'s pod deleted", logs.wait(30*time.Second))
	}
	gap, at := w.MaxWriteGapAt()
	t.Logf("at %s: leader %s's pod deleted, back and the ring ready in %.1fs; longest write gap %s (began %.2fs after the deletion; %s before it)",
		d, leader, back.Seconds(), gap.Round(time.Millisecond), at.Sub(start).Seconds(), calm.Round(time.Millisecond))
	w.Stop()
	checkWorkload(ctx, t, w)
}

// spokesSeeDistance checks that the spokes' gossip between member
// clusters crosses the distance just set: the direct probes each spoke
// sends to every other member cluster's spoke (memberlist's UDP ping to
// ack, the round trips the ring's timing Auto is derived from), read from
// its etcdfed_spoke_gossip_round_trip_seconds histogram, are at least 90%
// above the histogram's largest bound at or under 0.8 x roundTrip (5 ms
// at 10 ms), over the probes sent after the distance was set, within two
// minutes. It fails otherwise (issue 35: on real nodes the spokes' gossip
// went straight to the other cluster's gossip address, 0.7-0.9 ms at
// 10 ms). It then logs the round-trip matrix of the ring's status, which
// follows its own hysteresis (a spoke publishes a median that moved by
// more than 10 ms, over a window of 128 probes, and a ring records it
// again only when the move matters to its timing or leader placement:
// pkg/timing RecordAgain).
func spokesSeeDistance(ctx context.Context, t *testing.T, topo *Topology, env *localenv.Env, etcd *ManagedEtcd, roundTrip time.Duration) {
	t.Helper()
	start := time.Now()
	bound := 0.0
	for _, b := range spokeRoundTripBuckets {
		if b <= roundTrip.Seconds()*0.8 {
			bound = b
		}
	}
	scrapers := map[string]func(context.Context) (metricSet, error){}
	base := map[string]metricSet{}
	for _, c := range topo.Members {
		scrapers[c.Name] = spokeMetrics(ctx, t, env, c)
		m, err := scrapers[c.Name](ctx)
		if err != nil {
			t.Fatalf("the metrics of %s's spoke: %v", c.Name, err)
		}
		base[c.Name] = m
	}
	var seen []string
	err := poll(ctx, 2*time.Minute, fmt.Sprintf("90%% of the spokes' probes between member clusters over %s", time.Duration(bound*float64(time.Second))), func(ctx context.Context) (string, error) {
		seen = seen[:0]
		short := ""
		for _, c := range topo.Members {
			m, err := scrapers[c.Name](ctx)
			if err != nil {
				return "", err
			}
			for _, peer := range topo.Members {
				if peer.Name == c.Name {
					continue
				}
				count := func(set metricSet, le string) float64 {
					return set.sum("etcdfed_spoke_gossip_round_trip_seconds_bucket", "peer", peer.Name, "le", le)
				}
				le := strconv.FormatFloat(bound, 'g', -1, 64)
				n := count(m, "+Inf") - count(base[c.Name], "+Inf")
				low := count(m, le) - count(base[c.Name], le)
				seen = append(seen, fmt.Sprintf("%s->%s %.0f of %.0f probes <= %ss", c.Name, peer.Name, low, n, le))
				if short == "" && (n < 5 || low > n/10) {
					short = seen[len(seen)-1]
				}
			}
		}
		return short, nil
	})
	if ec, err := etcd.Get(ctx, topo.Hub); err == nil {
		var matrix []string
		for _, r := range ec.Status.RoundTrips {
			matrix = append(matrix, fmt.Sprintf("%s->%s %s", r.From, r.To, time.Duration(r.MedianMicros)*time.Microsecond))
		}
		timing := "none"
		if ec.Status.Timing != nil {
			timing = fmt.Sprintf("%+v", *ec.Status.Timing)
		}
		t.Logf("the ring's round-trip matrix %.1fs after the distance was set: %s; timing %s", time.Since(start).Seconds(), strings.Join(matrix, ", "), timing)
	}
	if err != nil {
		t.Fatalf("the spokes' gossip at %s between member clusters, %.1fs after it was set: %v; %s",
			roundTrip, time.Since(start).Seconds(), err, strings.Join(seen, ", "))
	}
	t.Logf("the spokes' probes crossed the distance %.1fs after it was set: %s", time.Since(start).Seconds(), strings.Join(seen, ", "))
}

// spokeRoundTripBuckets are the bounds of the spokes' round-trip
// histogram (spoke/gossip/metrics.go).
var spokeRoundTripBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5}

// spokeMetrics returns a scraper of the /metrics of c's gossiping spoke
// (the elected replica), read from inside its pod's network namespace
// over TLS with the token of a service account bound to
// etcdfed-metrics-reader (the spoke serves /metrics to such callers only).
func spokeMetrics(ctx context.Context, t *testing.T, env *localenv.Env, c *Cluster) func(context.Context) (metricSet, error) {
	t.Helper()
	const ns, name = "etcdfed-system", "spoke-metrics-test"
	_, err := c.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = c.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "etcdfed-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tok, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "etcdfed.dev/spoke-leader=true"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the gossiping spoke of %s: %d pods, %v", c.Name, len(pods.Items), err)
	}
	ip, err := netip.ParseAddr(pods.Items[0].Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	netns, err := env.PodNetns(c.Name, ip)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test reading a pod's metrics
		DialContext: func(ctx context.Context, network, _ string) (conn net.Conn, err error) {
			err = realnode.InNetnsPath(netns, func() (err error) {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:8080")
				return err
			})
			return conn, err
		}}}
	return func(ctx context.Context) (metricSet, error) {
		body, err := getMetrics(ctx, client, "https://"+ip.String()+":8080/metrics", tok.Status.Token)
		if err != nil {
			return nil, fmt.Errorf("the metrics of %s's spoke: %w", c.Name, err)
		}
		return parseMetrics(body), nil
	}
}
