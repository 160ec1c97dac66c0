package multicluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Every WaitForX polls until its condition holds or its timeout (or ctx)
// ends, and then returns an error saying what it saw last.

const defaultPoll = 250 * time.Millisecond

// fatalOnError returns a function that fails t at once on a non-nil error
// (the specs' must).
func fatalOnError(t testing.TB) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func poll(ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (string, error)) error {
	// The last answer and the last error are kept apart: a read cut short
	// near the deadline (client-go's rate limiter refuses a wait it cannot
	// finish before it, with ctx not yet done) says nothing about the thing
	// waited for, and must not hide the last answer that did.
	var answer, failed string
	err := wait.PollUntilContextTimeout(ctx, defaultPoll, timeout, true, func(ctx context.Context) (bool, error) {
		why, err := cond(ctx)
		if err != nil {
			failed = err.Error()
			return false, nil
		}
		answer, failed = why, ""
		return why == "", nil
	})
	if err == nil {
		return nil
	}
	last := answer
	switch {
	case answer == "":
		last = failed
	case failed != "":
		last = answer + "; the reads after it failed: " + failed
	}
	return fmt.Errorf("%s: not after %s (last: %s): %w", what, timeout, last, err)
}

// HoldFor runs check every `every` for d (each check given ctx) and
// returns the first error check gives (what broke the hold), nil when
// none did through d: the counterpart of a WaitForX, for a state that must
// last rather than one that must come.
func HoldFor(ctx context.Context, d, every time.Duration, check func(ctx context.Context) error) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := check(ctx); err != nil {
			return err
		}
		sleepCtx(ctx, every)
	}
	return nil
}

// WaitForClusterReadyInput is the input of WaitForClusterReady.
type WaitForClusterReadyInput struct {
	Cluster *Cluster
	Timeout time.Duration
}

// WaitForClusterReady waits until the apiserver answers /readyz and every
// node (if it has any: a hub may have none) is Ready.
func WaitForClusterReady(ctx context.Context, in WaitForClusterReadyInput) error {
	return poll(ctx, orDefault(in.Timeout, 2*time.Minute), "cluster "+in.Cluster.Name+" ready", func(ctx context.Context) (string, error) {
		body, err := in.Cluster.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return "", fmt.Errorf("readyz: %w", err)
		}
		if strings.TrimSpace(string(body)) != "ok" {
			return "readyz: " + string(body), nil
		}
		nodes, err := in.Cluster.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, n := range nodes.Items {
			if !nodeReady(&n) {
				return "node " + n.Name + " not Ready", nil
			}
		}
		return "", nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitForPodInput names a pod.
type WaitForPodInput struct {
	Cluster   *Cluster
	Namespace string
	Name      string
	Timeout   time.Duration
}

// WaitForPodIP waits until the pod has an IP and returns the pod.
func WaitForPodIP(ctx context.Context, in WaitForPodInput) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := poll(ctx, orDefault(in.Timeout, 2*time.Minute), fmt.Sprintf("pod %s/%s in %s has an IP", in.Namespace, in.Name, in.Cluster.Name), func(ctx context.Context) (string, error) {
		p, err := in.Cluster.Clientset.CoreV1().Pods(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		pod = p
		if p.Status.PodIP == "" {
			return "phase " + string(p.Status.Phase) + " " + p.Status.Message, nil
		}
		return "", nil
	})
	return pod, err
}

// WaitForPodReady waits until the pod is Ready and returns it.
func WaitForPodReady(ctx context.Context, in WaitForPodInput) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := poll(ctx, orDefault(in.Timeout, 2*time.Minute), fmt.Sprintf("pod %s/%s in %s Ready", in.Namespace, in.Name, in.Cluster.Name), func(ctx context.Context) (string, error) {
		p, err := in.Cluster.Clientset.CoreV1().Pods(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		pod = p
		if !PodReady(p) {
			return describePod(p), nil
		}
		return "", nil
	})
	return pod, err
}

// WaitForPodGone waits until the pod is not found.
func WaitForPodGone(ctx context.Context, in WaitForPodInput) error {
	return poll(ctx, orDefault(in.Timeout, 2*time.Minute), fmt.Sprintf("pod %s/%s in %s gone", in.Namespace, in.Name, in.Cluster.Name), func(ctx context.Context) (string, error) {
		p, err := in.Cluster.Clientset.CoreV1().Pods(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "", nil
		case err != nil:
			return "", err
		}
		return "still there: " + describePod(p), nil
	})
}

func describePod(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, c := range p.Status.ContainerStatuses {
		s := c.Name
		switch {
		case c.State.Waiting != nil:
			s += " waiting " + c.State.Waiting.Reason
		case c.State.Running != nil:
			s += fmt.Sprintf(" running ready=%v", c.Ready)
		case c.State.Terminated != nil:
			s += fmt.Sprintf(" terminated %d", c.State.Terminated.ExitCode)
		}
		parts = append(parts, fmt.Sprintf("%s restarts=%d", s, c.RestartCount))
	}
	return strings.Join(parts, ", ")
}

// WaitForMemberInZoneInput names a member pod and the zone it must run in.
type WaitForMemberInZoneInput struct {
	Cluster   *Cluster
	Namespace string
	Pod       string
	Zone      string
	Timeout   time.Duration
}

// WaitForMemberInZone waits until the pod is bound to a node of the zone.
func WaitForMemberInZone(ctx context.Context, in WaitForMemberInZoneInput) error {
	return poll(ctx, orDefault(in.Timeout, time.Minute), fmt.Sprintf("pod %s/%s in zone %s", in.Namespace, in.Pod, in.Zone), func(ctx context.Context) (string, error) {
		p, err := in.Cluster.Clientset.CoreV1().Pods(in.Namespace).Get(ctx, in.Pod, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if p.Spec.NodeName == "" {
			return "not scheduled", nil
		}
		n, err := in.Cluster.Clientset.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if z := n.Labels[corev1.LabelTopologyZone]; z != in.Zone {
			return "on node " + n.Name + " in zone " + z, nil
		}
		return "", nil
	})
}

// WaitForRecordResolvesInput names a DNS record and the address it must
// resolve to on every server.
type WaitForRecordResolvesInput struct {
	Servers []string
	Name    string
	Address string
	Timeout time.Duration
}

// WaitForRecordResolves waits until every server that serves the name's
// zone answers its A (or AAAA) query with exactly the address, and at
// least one does. A server that refuses the zone (REFUSED: its member
// cluster hosts none of the ring's members and is not named for it, so
// the hub gave it no zone) is not asked again.
func WaitForRecordResolves(ctx context.Context, in WaitForRecordResolvesInput) error {
	want, err := netip.ParseAddr(in.Address)
	if err != nil {
		return err
	}
	qtype := dns.TypeA
	if want.Is6() {
		qtype = dns.TypeAAAA
	}
	if len(in.Servers) == 0 {
		return errors.New("WaitForRecordResolves: no DNS servers")
	}
	return poll(ctx, orDefault(in.Timeout, time.Minute), fmt.Sprintf("%s resolves to %s", in.Name, in.Address), func(ctx context.Context) (string, error) {
		served := 0
		for _, srv := range in.Servers {
			got, err := lookup(ctx, srv, dns.Fqdn(in.Name), qtype)
			if errors.Is(err, errRefused) {
				continue
			}
			if err != nil {
				return "", fmt.Errorf("%s: %w", srv, err)
			}
			if len(got) != 1 || got[0] != want {
				return fmt.Sprintf("%s answers %v", srv, got), nil
			}
			served++
		}
		if served == 0 {
			return fmt.Sprintf("every server of %v refuses the zone", in.Servers), nil
		}
		return "", nil
	})
}

// errRefused: the server does not serve the name's zone.
var errRefused = errors.New("rcode REFUSED: the server does not serve the zone")

func lookup(ctx context.Context, server, name string, qtype uint16) ([]netip.Addr, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Timeout: 2 * time.Second}
	resp, _, err := c.ExchangeContext(ctx, m, server)
	if err != nil {
		return nil, err
	}
	if resp.Rcode == dns.RcodeRefused {
		return nil, errRefused
	}
	if resp.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("rcode %s", dns.RcodeToString[resp.Rcode])
	}
	var out []netip.Addr
	for _, rr := range resp.Answer {
		switch r := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(r.A.To4())
			out = append(out, a)
		case *dns.AAAA:
			a, _ := netip.AddrFromSlice(r.AAAA)
			out = append(out, a)
		}
	}
	return out, nil
}

// WaitForEtcdMembersInput describes an etcd cluster to wait for.
type WaitForEtcdMembersInput struct {
	Config EtcdClientConfig
	// Members are the names of the voting members every endpoint must
	// list (and nothing else).
	Members []string
	Timeout time.Duration
}

// WaitForEtcdMembers waits until the member list is exactly Members, all
// started voters, and every endpoint reports the same leader and answers a
// linearizable read.
func WaitForEtcdMembers(ctx context.Context, in WaitForEtcdMembersInput) error {
	c, err := EtcdClient(in.Config)
	if err != nil {
		return err
	}
	defer c.Close()
	want := append([]string(nil), in.Members...)
	sort.Strings(want)
	return poll(ctx, orDefault(in.Timeout, 2*time.Minute), fmt.Sprintf("etcd members %v healthy", want), func(ctx context.Context) (string, error) {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		ml, err := c.MemberList(lctx)
		if err != nil {
			return "", fmt.Errorf("member list: %w", err)
		}
		var got []string
		for _, m := range ml.Members {
			if m.IsLearner {
				return "member " + m.Name + " is a learner", nil
			}
			if m.Name == "" {
				return "a member has not started", nil
			}
			got = append(got, m.Name)
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Sprintf("members %v", got), nil
		}
		var leader uint64
		for _, ep := range in.Config.Endpoints {
			st, err := memberStatus(ctx, c, ep)
			if err != nil {
				return "", err
			}
			if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
				return fmt.Sprintf("%s sees leader %x", ep, st.Leader), nil
			}
			leader = st.Leader
			one, err := EtcdClient(EtcdClientConfig{Endpoints: []string{ep}, DNSServers: in.Config.DNSServers, TLS: in.Config.TLS})
			if err != nil {
				return "", err
			}
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err = one.Get(rctx, "health")
			cancel()
			_ = one.Close()
			if err != nil {
				return "", fmt.Errorf("linearizable read on %s: %w", ep, err)
			}
		}
		return "", nil
	})
}

// WaitForEndpointUnreachable waits until a client of the endpoint alone
// cannot read (the member is cut off or down).
func WaitForEndpointUnreachable(ctx context.Context, cfg EtcdClientConfig, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, time.Minute), fmt.Sprintf("%v unreachable", cfg.Endpoints), func(ctx context.Context) (string, error) {
		c, err := EtcdClient(cfg)
		if err != nil {
			return "", nil //nolint:nilerr // cannot even build a client: unreachable
		}
		defer c.Close()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := c.Get(rctx, "health"); err != nil {
			return "", nil //nolint:nilerr // the failure is the condition
		}
		return "still answers", nil
	})
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
