package supportbundle

import (
	"context"
	"fmt"
	"sort"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/scheme"
)

// events writes the events of a namespace matching a field selector.
func (b *bundle) events(ctx context.Context, cs kubernetes.Interface, file, ns, selector string) {
	ev, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector, Limit: 500})
	if err != nil {
		b.fail("events in "+ns, err)
		return
	}
	sort.Slice(ev.Items, func(i, j int) bool { return ev.Items[i].LastTimestamp.Before(&ev.Items[j].LastTimestamp) })
	for i := range ev.Items {
		ev.Items[i].ManagedFields = nil
	}
	b.addYAML(file, ev.Items)
}

// pods writes the pods matching selector and the bounded logs of each of
// their containers (the previous run's too, when a container restarted).
func (b *bundle) pods(ctx context.Context, cs kubernetes.Interface, dir, ns, selector string, o Options) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 200})
	if err != nil {
		b.fail("pods in "+dir+"/"+ns, err)
		return
	}
	for i := range pods.Items {
		pods.Items[i].ManagedFields = nil
	}
	b.addYAML(dir+"/pods.yaml", pods.Items)
	for _, p := range pods.Items {
		for _, c := range p.Spec.InitContainers {
			b.log(ctx, cs, dir, p, c.Name, false, o)
		}
		for _, c := range p.Spec.Containers {
			b.log(ctx, cs, dir, p, c.Name, false, o)
			for _, st := range p.Status.ContainerStatuses {
				if st.Name == c.Name && st.RestartCount > 0 {
					b.log(ctx, cs, dir, p, c.Name, true, o)
				}
			}
		}
	}
}

func (b *bundle) log(ctx context.Context, cs kubernetes.Interface, dir string, p corev1.Pod, container string, previous bool, o Options) {
	lines, limit := o.LogLines, o.LogBytes
	req := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, TailLines: &lines, LimitBytes: &limit, Previous: previous})
	data, err := req.DoRaw(ctx)
	name := fmt.Sprintf("%s/logs/%s_%s.log", dir, p.Name, container)
	if previous {
		name = strings.TrimSuffix(name, ".log") + ".previous.log"
	}
	if err != nil {
		b.fail("log of "+p.Name+"/"+container, err)
		return
	}
	b.add(name, data)
}

// member collects one member cluster: with an admin config when given,
// else with the hub's credentials from its registration.
func (b *bundle) member(ctx context.Context, name string, reg *rest.Config, ec *etcdfedv1.EtcdCluster, o Options) {
	dir := "members/" + name
	cfg, admin := o.Members[name], true
	if cfg == nil {
		cfg, admin = reg, false
	}
	if cfg == nil {
		b.fail(dir, fmt.Errorf("not registered in the hub and no --member-kubeconfig %s=FILE given", name))
		return
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = o.Timeout
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.fail(dir, err)
		return
	}
	ns := o.RingNamespace
	for file, list := range map[string]client.ObjectList{
		"etcdmembers.yaml":  &etcdfedv1.EtcdMemberList{},
		"etcdspokes.yaml":   &etcdfedv1.EtcdSpokeList{},
		"etcddnszones.yaml": &etcdfedv1.EtcdDNSZoneList{},
		"leases.yaml":       &coordinationv1.LeaseList{},
	} {
		l := list
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			b.fail(dir+"/"+file, err)
			continue
		}
		b.addYAML(dir+"/"+file, stripManaged(l))
	}
	var secs corev1.SecretList
	if err := c.List(ctx, &secs, client.InNamespace(ns), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
		b.fail(dir+"/secrets.yaml", err)
	} else {
		b.add(dir+"/secrets.yaml", b.redactedSecrets(secs.Items))
	}
	if !admin {
		b.fail(dir+" pods, events and logs", fmt.Errorf("read with the hub's own credentials, which may not read them: give --member-kubeconfig %s=FILE", name))
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.fail(dir, err)
		return
	}
	b.events(ctx, cs, dir+"/events.yaml", ns, "")
	b.pods(ctx, cs, dir+"/spoke", ns, "app.kubernetes.io/name=etcdfed-spoke", o)
	b.pods(ctx, cs, dir+"/etcd", ns, etcdfedv1.LabelClusterUID+"="+string(ec.UID), o)
}

// stripManaged drops the managed fields of every item of a list.
func stripManaged(l client.ObjectList) runtime.Object {
	_ = meta.EachListItem(l, func(o runtime.Object) error {
		if m, err := meta.Accessor(o); err == nil {
			m.SetManagedFields(nil)
		}
		return nil
	})
	return l
}
