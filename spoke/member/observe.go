package member

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/etcdlog"
	"github.com/etcdfed/etcdfed/spoke/etcdstatus"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// observe reads everything a pass needs about m into a snapshot: the TLS
// Secret, the objects of every owned kind (from the cache; an object of the
// member's name the cache does not show is looked up past it, so that a
// volume is called lost, or a pod or volume created, only on the
// apiserver's word), the current pod's node (its zone, and whether it is
// cordoned), etcd's own view of the member and what its log says. It
// writes no object; it keeps the etcd and log readers' per-member state (a
// client, the last read), dropping it when there is no pod to read. The
// etcd read and the log read are bounded by the readers' timeouts.
func (r *Reconciler) observe(ctx context.Context, m *etcdfedv1.EtcdMember) (*snapshot, error) {
	s := &snapshot{m: m}
	if spec.TLSEnabled(m) {
		sec := &corev1.Secret{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.TLS.SecretName}, sec); err == nil {
			s.secret = sec
		} else if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get TLS Secret: %w", err)
		}
	}
	claimName := spec.ClaimName(m, m.Spec.Incarnation)
	for _, k := range ownedKinds {
		objs, err := k.read(ctx, r.Client, r.APIReader, m)
		if err != nil {
			return nil, fmt.Errorf("read %ss: %w", k.kind, err)
		}
		for _, o := range objs {
			switch o := o.(type) {
			case *corev1.Pod:
				s.pod = o
			case *corev1.Service:
				s.service = o
			case *policyv1.PodDisruptionBudget:
				s.budget = o
			case *corev1.PersistentVolumeClaim:
				if spec.OwnedBy(m, o.Labels) {
					s.claims = append(s.claims, *o)
				}
				if o.Name == claimName {
					s.claim = o
				}
			}
		}
	}
	cur := currentPod(m, s.pod)
	if cur != nil && cur.Spec.NodeName != "" {
		node, err := r.node(ctx, cur.Spec.NodeName)
		if err != nil {
			return nil, err
		}
		if node != nil {
			s.node, s.zone = node, node.Labels[corev1.LabelTopologyZone]
		}
	}
	s.etcd = r.readEtcd(ctx, m, s.secret, cur)
	s.log = r.readLog(ctx, m, cur)
	return s, nil
}

// node reads the node a pod runs on: its zone label, and whether it is
// cordoned (a drain asks for the member's disruption). nil when gone.
func (r *Reconciler) node(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return n, nil
}

// readEtcd reads the member's own view from its etcd when p (the current
// pod) runs with an IP and, with TLS, the Secret can be used.
func (r *Reconciler) readEtcd(ctx context.Context, m *etcdfedv1.EtcdMember, sec *corev1.Secret, p *corev1.Pod) etcdRead {
	key := client.ObjectKeyFromObject(m).String()
	if p == nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
		r.Etcd.Forget(key)
		return etcdRead{}
	}
	e := etcdRead{pod: p, next: r.StatusInterval}
	if e.next == 0 {
		e.next = DefaultStatusInterval
	}
	t := etcdstatus.Target{
		Endpoint:   fmt.Sprintf("%s://%s", spec.Scheme(m), hostPort(p.Status.PodIP, spec.ClientPort)),
		ServerName: m.Spec.DNSName,
	}
	if spec.TLSEnabled(m) {
		if e.blocked = tlsBlocker(m, sec); e.blocked != nil {
			return e
		}
		t.CA, t.Cert, t.Key, t.Version = sec.Data["ca.crt"], sec.Data["tls.crt"], sec.Data["tls.key"], sec.ResourceVersion
	}
	e.view, e.err = r.Etcd.Read(ctx, key, t)
	if joining(e.view, p, time.Now()) {
		e.next = min(e.next, JoiningStatusInterval)
	}
	return e
}

// readLog reads a bounded tail of etcd's log (pods/log, at most once per
// Logs.Interval) when p (the current pod) runs on a node and is not ready:
// it explains a member that cannot reach its peers. A ready member's log is
// not read.
func (r *Reconciler) readLog(ctx context.Context, m *etcdfedv1.EtcdMember, p *corev1.Pod) logRead {
	if r.Logs == nil {
		return logRead{state: logOff}
	}
	key := client.ObjectKeyFromObject(m).String()
	if p == nil || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
		r.Logs.Forget(key)
		return logRead{state: logNoPod}
	}
	plan := etcdlog.PlanRead(p, pod.ContainerEtcd, time.Now())
	switch {
	case plan.Ready:
		r.Logs.Forget(key)
		return logRead{state: logReady}
	case !plan.Read:
		return logRead{state: logNotDue, next: plan.After}
	}
	res, next := r.Logs.Read(ctx, key, p, plan.Previous)
	return logRead{state: logWasRead, previous: plan.Previous, result: res, next: next}
}

func hostPort(ip string, port int32) string {
	return net.JoinHostPort(ip, strconv.Itoa(int(port)))
}

// joining: the member runs as a learner, or its pod started less than a
// minute ago and etcd gives no view yet. Its first view and its promotion
// are what the hub waits for, seconds away, so the view is read every
// JoiningStatusInterval; a member still without a view after a minute is
// failing for some other reason and goes back to the normal interval.
func joining(view *etcdfedv1.MemberEtcdView, p *corev1.Pod, now time.Time) bool {
	if view != nil {
		return view.IsLearner
	}
	return p.Status.StartTime != nil && now.Sub(p.Status.StartTime.Time) < time.Minute
}
