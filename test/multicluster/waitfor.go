package multicluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// The named waits on an EtcdCluster's status, on objects going away and
// on the hub's connections. Each takes a timeout (a default when zero)
// and fails saying what it waited for and what it saw last.

// WaitForStatusInput is what WaitForStatus waits for.
type WaitForStatusInput struct {
	Hub  *Cluster
	Etcd *ManagedEtcd
	// What is awaited, said in the error ("ClientsReady=True").
	What string
	// Until says why the EtcdCluster read is not there yet, "" when it
	// is. It sees every version read, in order.
	Until func(ec *etcdfedv1.EtcdCluster) string
	// Timeout: 2 minutes when zero.
	Timeout time.Duration
}

// WaitForStatus reads the EtcdCluster until Until accepts it (the
// version accepted is Until's last argument).
func WaitForStatus(ctx context.Context, in WaitForStatusInput) error {
	return poll(ctx, orDefault(in.Timeout, 2*time.Minute), "EtcdCluster "+in.Etcd.Namespace+"/"+in.Etcd.Name+": "+in.What, func(ctx context.Context) (string, error) {
		ec, err := in.Etcd.Get(ctx, in.Hub)
		if err != nil {
			return "", err
		}
		return in.Until(ec), nil
	})
}

// WaitForConditionInput names a condition of the EtcdCluster and what it
// must say; an empty field accepts anything.
type WaitForConditionInput struct {
	Hub    *Cluster
	Etcd   *ManagedEtcd
	Type   string
	Status metav1.ConditionStatus
	Reason string
	// MessageHas: the message contains every one of these.
	MessageHas []string
	// Timeout: 2 minutes when zero.
	Timeout time.Duration
}

func (in WaitForConditionInput) String() string {
	s := in.Type
	if in.Status != "" {
		s += "=" + string(in.Status)
	}
	if in.Reason != "" {
		s += " " + in.Reason
	}
	if len(in.MessageHas) > 0 {
		s += fmt.Sprintf(" saying %q", in.MessageHas)
	}
	return s
}

// WaitForCondition waits until the EtcdCluster's condition is as asked,
// and returns it with the EtcdCluster it was read from.
func WaitForCondition(ctx context.Context, in WaitForConditionInput) (*metav1.Condition, *etcdfedv1.EtcdCluster, error) {
	var c *metav1.Condition
	var got *etcdfedv1.EtcdCluster
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: in.Hub, Etcd: in.Etcd, What: in.String(), Timeout: in.Timeout, Until: func(ec *etcdfedv1.EtcdCluster) string {
		got = ec
		c = meta.FindStatusCondition(ec.Status.Conditions, in.Type)
		switch {
		case c == nil:
			return "no " + in.Type
		case in.Status != "" && c.Status != in.Status, in.Reason != "" && c.Reason != in.Reason:
			return fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
		for _, w := range in.MessageHas {
			if !strings.Contains(c.Message, w) {
				return fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		return ""
	}})
	return c, got, err
}

// WaitForDegradedClear waits until Degraded is not True, or, with naming,
// until its message no longer contains naming.
func WaitForDegradedClear(ctx context.Context, hub *Cluster, m *ManagedEtcd, naming string, timeout time.Duration) error {
	what := "Degraded not True"
	if naming != "" {
		what = fmt.Sprintf("Degraded no longer naming %q", naming)
	}
	return WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: m, What: what, Timeout: timeout, Until: func(ec *etcdfedv1.EtcdCluster) string {
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, naming) {
			return "Degraded: " + c.Message
		}
		return ""
	}})
}

// WaitForDegradedSays waits until Degraded is True saying want, and
// returns its message.
func WaitForDegradedSays(ctx context.Context, hub *Cluster, m *ManagedEtcd, want string, timeout time.Duration) (string, error) {
	c, _, err := WaitForCondition(ctx, WaitForConditionInput{Hub: hub, Etcd: m, Type: etcdfedv1.ConditionDegraded, Status: metav1.ConditionTrue, MessageHas: []string{want}, Timeout: timeout})
	if err != nil {
		return "", err
	}
	return c.Message, nil
}

// WaitForOperationInput names an operation; an empty field accepts any.
type WaitForOperationInput struct {
	Hub  *Cluster
	Etcd *ManagedEtcd
	Type etcdfedv1.OperationType
	Step string
	// Timeout: 2 minutes when zero.
	Timeout time.Duration
}

// WaitForOperation waits until the EtcdCluster records an operation as
// asked, and returns it.
func WaitForOperation(ctx context.Context, in WaitForOperationInput) (*etcdfedv1.MembershipOperation, error) {
	what := "an operation in flight"
	if in.Type != "" {
		what = "a " + string(in.Type) + " in flight"
	}
	if in.Step != "" {
		what += " at step " + in.Step
	}
	var op *etcdfedv1.MembershipOperation
	err := WaitForStatus(ctx, WaitForStatusInput{Hub: in.Hub, Etcd: in.Etcd, What: what, Timeout: in.Timeout, Until: func(ec *etcdfedv1.EtcdCluster) string {
		op = ec.Status.Operation
		switch {
		case op == nil:
			return "no operation"
		case in.Type != "" && op.Type != in.Type, in.Step != "" && op.Step != in.Step:
			return fmt.Sprintf("operation %s %s at %s", op.Type, op.Member, op.Step)
		}
		return ""
	}})
	return op, err
}

// WaitForGone waits until obj (its namespace and name) is not found in c.
func WaitForGone(ctx context.Context, c *Cluster, obj client.Object, timeout time.Duration) error {
	key := client.ObjectKeyFromObject(obj)
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndexByte(kind, '.')+1:]
	return poll(ctx, orDefault(timeout, 2*time.Minute), fmt.Sprintf("%s %s gone from %s", kind, key, c.Name), func(ctx context.Context) (string, error) {
		switch err := c.Client.Get(ctx, key, obj.DeepCopyObject().(client.Object)); {
		case apierrors.IsNotFound(err):
			return "", nil
		case err != nil:
			return "", err
		}
		return "still there", nil
	})
}

// WaitForHubEngaged waits until the hub's metrics say it has engaged the
// member cluster (its connection through whatever stands between them is
// up).
func WaitForHubEngaged(ctx context.Context, metricsURL, cluster string, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, time.Minute), "the hub engaged with "+cluster, func(context.Context) (string, error) {
		ok, err := hubEngaged(metricsURL, cluster)
		if err != nil || !ok {
			return fmt.Sprintf("engaged %v", ok), err
		}
		return "", nil
	})
}

// evacuated says why the EtcdCluster has not moved its members out of
// where (the members in picks): a member still there, fewer than replicas
// ready, an operation in flight; "" when it has.
func evacuated(ec *etcdfedv1.EtcdCluster, where string, replicas int, in func(etcdfedv1.MemberStatus) bool) string {
	for _, m := range ec.Status.Members {
		if in(m) {
			return describeEtcdCluster(ec, m.Name+" still in "+where)
		}
	}
	if int(ec.Status.ReadyMembers) != replicas || ec.Status.Operation != nil {
		return describeEtcdCluster(ec, fmt.Sprintf("%d ready", ec.Status.ReadyMembers))
	}
	return ""
}

// WaitForSpoke reads the spoke's EtcdSpoke in c until until accepts it
// ("" when it does; otherwise what it saw).
func WaitForSpoke(ctx context.Context, c *Cluster, what string, timeout time.Duration, until func(*etcdfedv1.EtcdSpoke) string) error {
	return poll(ctx, orDefault(timeout, time.Minute), "the spoke of "+c.Name+": "+what, func(ctx context.Context) (string, error) {
		sp := &etcdfedv1.EtcdSpoke{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: etcdfedv1.DefaultRingNamespace, Name: etcdfedv1.SpokeObjectName}, sp); err != nil {
			return "", err
		}
		return until(sp), nil
	})
}

// WaitForPodReplaced waits until the pod named in is a new one (not the
// one with UID old) and Ready, and returns it.
func WaitForPodReplaced(ctx context.Context, in WaitForPodInput, old types.UID) (*corev1.Pod, error) {
	var got *corev1.Pod
	err := poll(ctx, orDefault(in.Timeout, 2*time.Minute), fmt.Sprintf("pod %s/%s in %s recreated and ready", in.Namespace, in.Name, in.Cluster.Name), func(ctx context.Context) (string, error) {
		p, err := in.Cluster.Clientset.CoreV1().Pods(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "no pod", nil
		case err != nil:
			return "", err
		case p.UID == old:
			return "old pod still there", nil
		case !PodReady(p):
			return describePod(p), nil
		}
		got = p
		return "", nil
	})
	return got, err
}

// WaitForRestarts waits until the pod's container has restarted at least
// n times (a crash loop), and returns its restart count.
func WaitForRestarts(ctx context.Context, in WaitForPodInput, container string, n int32) (int32, error) {
	var restarts int32
	err := poll(ctx, orDefault(in.Timeout, 2*time.Minute), fmt.Sprintf("pod %s/%s in %s: %s restarted %d times", in.Namespace, in.Name, in.Cluster.Name, container, n), func(ctx context.Context) (string, error) {
		p, err := in.Cluster.Clientset.CoreV1().Pods(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == container && cs.RestartCount >= n {
				restarts = cs.RestartCount
				return "", nil
			}
		}
		return describePod(p), nil
	})
	return restarts, err
}

// WaitForLearner waits until etcd's member list (through c) has a learner.
func WaitForLearner(ctx context.Context, c *clientv3.Client, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, 2*time.Minute), "a learner in etcd", func(ctx context.Context) (string, error) {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := c.MemberList(lctx)
		if err != nil {
			return "", err
		}
		for _, m := range resp.Members {
			if m.IsLearner {
				return "", nil
			}
		}
		return fmt.Sprintf("%d members, no learner", len(resp.Members)), nil
	})
}

// WaitForRingGone waits until the EtcdCluster m is gone from the hub and
// no member cluster holds an EtcdMember of it (its UID).
func WaitForRingGone(ctx context.Context, topo *Topology, m *ManagedEtcd, uid types.UID, timeout time.Duration) error {
	return poll(ctx, orDefault(timeout, 2*time.Minute), "EtcdCluster "+m.Name+" deleted with its members", func(ctx context.Context) (string, error) {
		if _, err := m.Get(ctx, topo.Hub); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("EtcdCluster still there (%v)", err), nil
		}
		for _, c := range topo.Members {
			var list etcdfedv1.EtcdMemberList
			if err := c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(uid)}); err != nil {
				return "", err
			}
			if len(list.Items) > 0 {
				return fmt.Sprintf("%d EtcdMembers left in %s", len(list.Items), c.Name), nil
			}
		}
		return "", nil
	})
}

// WaitForHubMetricInput names a series of the hub's metrics and the value
// it must have.
type WaitForHubMetricInput struct {
	// URL is the hub's /metrics.
	URL string
	// What is awaited, said in the error.
	What   string
	Metric string
	// Labels are name, value pairs the series must carry (the sum of the
	// series that match is compared).
	Labels []string
	Want   float64
	// Timeout: 2 minutes when zero.
	Timeout time.Duration
}

// WaitForHubMetric waits until the sum of the metric's series that carry
// the labels equals Want.
func WaitForHubMetric(ctx context.Context, in WaitForHubMetricInput) error {
	return poll(ctx, orDefault(in.Timeout, 2*time.Minute), fmt.Sprintf("%s (%s%v = %s)", in.What, in.Metric, in.Labels, strconv.FormatFloat(in.Want, 'f', -1, 64)), func(ctx context.Context) (string, error) {
		m, err := scrape(ctx, in.URL)
		if err != nil {
			return err.Error(), nil
		}
		if got := m.sum(in.Metric, in.Labels...); got != in.Want {
			return strconv.FormatFloat(got, 'f', -1, 64), nil
		}
		return "", nil
	})
}

// WaitForEveryMemberStatus asks every member in etcd's member list for
// its status until each answers in one round, and returns those answers
// by member name (timeout: a minute when zero).
func WaitForEveryMemberStatus(ctx context.Context, m *ManagedEtcd, timeout time.Duration) (map[string]*clientv3.StatusResponse, error) {
	var got map[string]*clientv3.StatusResponse
	err := poll(ctx, orDefault(timeout, time.Minute), "every member's etcd status", func(ctx context.Context) (string, error) {
		round := map[string]*clientv3.StatusResponse{}
		var not []string
		err := eachMemberStatus(ctx, m, nil, func(name string, st *clientv3.StatusResponse, err error) {
			if err != nil {
				not = append(not, fmt.Sprintf("%s: %v", name, err))
				return
			}
			round[name] = st
		})
		if err != nil {
			return err.Error(), nil
		}
		if len(not) > 0 {
			return strings.Join(not, "; "), nil
		}
		got = round
		return "", nil
	})
	return got, err
}

// ConditionSeen is what WatchForCondition saw: the condition as asked and
// when it was read, or no condition if it never came.
type ConditionSeen struct {
	Condition *metav1.Condition
	At        time.Time
}

// Since says when the condition came, after what happened at from, and
// its message ("%.1fs after <what>: <message>"); "" if it never came.
func (s ConditionSeen) Since(from time.Time, what string) string {
	if s.Condition == nil {
		return ""
	}
	return fmt.Sprintf("%.1fs after %s: %s", s.At.Sub(from).Seconds(), what, s.Condition.Message)
}

// WatchForCondition runs WaitForCondition in the background (until the
// condition is as asked, in.Timeout passes or ctx ends: give the hold it
// watches) and sends what it saw, once.
func WatchForCondition(ctx context.Context, in WaitForConditionInput) <-chan ConditionSeen {
	seen := make(chan ConditionSeen, 1)
	go func() {
		c, _, err := WaitForCondition(ctx, in)
		if err != nil {
			seen <- ConditionSeen{}
			return
		}
		seen <- ConditionSeen{Condition: c, At: time.Now()}
	}()
	return seen
}

// WaitForMembersConditionInput names a ring (its UID), how many members
// it has, and a condition every one of its EtcdMembers must carry.
type WaitForMembersConditionInput struct {
	Topology *Topology
	UID      types.UID
	Members  int
	Type     string
	Status   metav1.ConditionStatus
	Reason   string
	// Timeout: 2 minutes when zero.
	Timeout time.Duration
}

// WaitForMembersCondition waits until the member clusters hold exactly
// Members EtcdMembers of the ring, each with the condition as asked.
func WaitForMembersCondition(ctx context.Context, in WaitForMembersConditionInput) error {
	what := fmt.Sprintf("every EtcdMember's %s=%s %s", in.Type, in.Status, in.Reason)
	return poll(ctx, orDefault(in.Timeout, 2*time.Minute), what, func(ctx context.Context) (string, error) {
		n := 0
		for _, c := range in.Topology.Members {
			var list etcdfedv1.EtcdMemberList
			if err := c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(in.UID)}); err != nil {
				return "", err
			}
			for _, m := range list.Items {
				pc := meta.FindStatusCondition(m.Status.Conditions, in.Type)
				if pc == nil || pc.Status != in.Status || pc.Reason != in.Reason {
					return fmt.Sprintf("%s in %s: %s %v", m.Name, c.Name, in.Type, pc), nil
				}
				n++
			}
		}
		if n != in.Members {
			return fmt.Sprintf("%d of %d members", n, in.Members), nil
		}
		return "", nil
	})
}
