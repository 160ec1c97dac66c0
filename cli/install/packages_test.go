package install_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/cli/install"
	hubrbac "github.com/etcdfed/etcdfed/config/rbac/hub"
	hubmemberrbac "github.com/etcdfed/etcdfed/config/rbac/hub-member"
	spokerbac "github.com/etcdfed/etcdfed/config/rbac/spoke"
	"github.com/etcdfed/etcdfed/dev/installtest"
	"github.com/etcdfed/etcdfed/spoke/app"
)

// renderings are the install packages as users render them (the samples
// of config/samples/install) and as the CLI does with its knobs.
func renderings(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	out := map[string][]*unstructured.Unstructured{}
	add := func(name string, objs []*unstructured.Unstructured, err error) {
		if err != nil {
			t.Fatalf("render %s: %v", name, err)
		}
		out[name] = objs
	}
	objs, err := install.RenderPackage("samples/install/hub")
	add("samples/install/hub", objs, err)
	objs, err = install.RenderPackage("samples/install/member")
	add("samples/install/member", objs, err)
	objs, err = install.RenderHub(install.HubOptions{Knobs: install.Knobs{Image: "registry.example/etcdfed:v1", LogLevel: "debug", NoLeaderElection: true},
		MetricsService: true, PrometheusOperator: true, EtcdClusterNamespaces: []string{"team-a"}, MetricsReaders: []string{"monitoring/prometheus", "group:ops"}})
	add("hub install (debug, no leader election, metrics, operator)", objs, err)
	objs, err = install.RenderMember(install.MemberOptions{Name: "member-1", Knobs: install.Knobs{Image: "registry.example/etcdfed@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", LogLevel: "2"},
		Expose: install.ExposeNodePort, GossipProfile: "lan"})
	add("cluster join (NodePort, log level 2)", objs, err)
	objs, err = install.RenderMember(install.MemberOptions{Name: "member-2", Advertise: "198.51.100.7", Knobs: install.Knobs{ImageRepository: "registry.example/etcdfed", ImageTag: "v2"}})
	add("cluster join (LoadBalancer)", objs, err)
	objs, err = install.RenderMember(install.MemberOptions{Name: "member-3", Advertise: "198.51.100.8", Knobs: install.Knobs{NoLeaderElection: true}})
	add("cluster join (no leader election)", objs, err)
	return out
}

// TestPackagesRenderTheKnobs: each knob lands where it should.
func TestPackagesRenderTheKnobs(t *testing.T) {
	r := renderings(t)
	find := func(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && (o.GetName() == name || strings.HasPrefix(o.GetName(), name+"-")) {
				return o
			}
		}
		t.Fatalf("no %s %s", kind, name)
		return nil
	}
	container := func(d *unstructured.Unstructured) map[string]any {
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		return cs[0].(map[string]any)
	}
	hub := container(find(r["hub install (debug, no leader election, metrics, operator)"], "Deployment", "etcdfed-hub"))
	args := fmt.Sprint(hub["args"])
	if !strings.Contains(args, "--metrics-readers=monitoring/prometheus,group:ops") {
		t.Errorf("hub args %s: want the metrics readers", args)
	}
	if _, err := install.RenderHub(install.HubOptions{MetricsReaders: []string{`x","--metrics-secure=false`}}); err == nil {
		t.Error("a metrics reader that is not one rendered")
	}
	if hub["image"] != "registry.example/etcdfed:v1" || !strings.Contains(args, "--zap-log-level=debug") || !strings.Contains(args, "--leader-elect=false") {
		t.Errorf("hub container: image %v, args %s", hub["image"], args)
	}
	find(r["hub install (debug, no leader election, metrics, operator)"], "Service", "etcdfed-hub-metrics")
	find(r["hub install (debug, no leader election, metrics, operator)"], "PrometheusRule", "etcdfed")
	find(r["hub install (debug, no leader election, metrics, operator)"], "RoleBinding", "etcdfed-hub")
	spoke := container(find(r["cluster join (NodePort, log level 2)"], "Deployment", "etcdfed-spoke"))
	if !strings.HasSuffix(fmt.Sprint(spoke["image"]), "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") || !strings.Contains(fmt.Sprint(spoke["env"]), "name:ETCDFED_SPOKE_V value:2") {
		t.Errorf("spoke container: image %v, env %v", spoke["image"], spoke["env"])
	}
	cm := find(r["cluster join (NodePort, log level 2)"], "ConfigMap", "etcdfed-spoke")
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "CLUSTER_NAME"); v != "member-1" {
		t.Errorf("spoke ConfigMap CLUSTER_NAME %q", v)
	}
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "GOSSIP_PROFILE"); v != "lan" {
		t.Errorf("spoke ConfigMap GOSSIP_PROFILE %q", v)
	}
	lb := container(find(r["cluster join (LoadBalancer)"], "Deployment", "etcdfed-spoke"))
	if lb["image"] != "registry.example/etcdfed/spoke:v2" {
		t.Errorf("spoke image %v, want registry.example/etcdfed/spoke:v2", lb["image"])
	}
	cm = find(r["cluster join (LoadBalancer)"], "ConfigMap", "etcdfed-spoke")
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "HELPER_IMAGE"); v != "registry.example/etcdfed/etcdfed-init:v2" {
		t.Errorf("spoke ConfigMap HELPER_IMAGE %q, want the etcdfed-init image", v)
	}
	if v, _, _ := unstructured.NestedString(cm.Object, "data", "DNS_ADVERTISE_ADDRESS"); v != "198.51.100.7:53" {
		t.Errorf("spoke ConfigMap DNS_ADVERTISE_ADDRESS %q", v)
	}
	if svc := find(r["cluster join (NodePort, log level 2)"], "Service", "etcdfed-spoke"); svc.Object["spec"].(map[string]any)["type"] != "NodePort" {
		t.Errorf("spoke Service %v", svc.Object["spec"])
	}
	for _, n := range []string{"cluster join (NodePort, log level 2)", "cluster join (LoadBalancer)"} {
		checkSpokeHA(t, n, r[n])
	}
	checkHubHA(t, find(r["samples/install/hub"], "Deployment", "etcdfed-hub"), find(r["samples/install/hub"], "PodDisruptionBudget", "etcdfed-hub"))
	// Without election: one spoke, and gossip to it (no replica labels
	// itself the leader).
	nle := r["cluster join (no leader election)"]
	if n, _, _ := unstructured.NestedFieldNoCopy(find(nle, "Deployment", "etcdfed-spoke").Object, "spec", "replicas"); fmt.Sprint(n) != "1" {
		t.Errorf("spoke without leader election: replicas %v, want 1", n)
	}
	if sel, _, _ := unstructured.NestedStringMap(find(nle, "Service", install.SpokeGossipService).Object, "spec", "selector"); len(sel) != 1 || sel[app.LabelLeader] != "" {
		t.Errorf("gossip Service without leader election selects %v: want every replica", sel)
	}
	if n, _, _ := unstructured.NestedFieldNoCopy(find(r["hub install (debug, no leader election, metrics, operator)"], "Deployment", "etcdfed-hub").Object, "spec", "replicas"); fmt.Sprint(n) != "1" {
		t.Errorf("hub without leader election: replicas %v, want 1", n)
	}
}

// checkHubHA: the hub runs two replicas (leader and warm standby), apart
// on nodes and zones, under a disruption budget.
func checkHubHA(t *testing.T, d, pdb *unstructured.Unstructured) {
	t.Helper()
	if n, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); fmt.Sprint(n) != "2" {
		t.Errorf("hub replicas %v, want 2", n)
	}
	if args, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers"); !strings.Contains(fmt.Sprint(args), "--leader-elect=true") {
		t.Errorf("hub without --leader-elect=true: %v", args)
	}
	terms, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	if s := fmt.Sprint(terms); !strings.Contains(s, "kubernetes.io/hostname") || !strings.Contains(s, "topology.kubernetes.io/zone") {
		t.Errorf("hub anti-affinity %v", terms)
	}
	if n, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "minAvailable"); fmt.Sprint(n) != "1" {
		t.Errorf("hub PodDisruptionBudget minAvailable %v", n)
	}
}

// checkSpokeHA: a member cluster's spoke runs two replicas rolled one at
// a time with a surge, apart on nodes and zones, under a disruption
// budget; DNS goes to every replica, gossip only to the leader.
func checkSpokeHA(t *testing.T, name string, objs []*unstructured.Unstructured) {
	t.Helper()
	var d, pdb, dnsSvc, gossipSvc *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() + "/" + o.GetName() {
		case "Deployment/etcdfed-spoke":
			d = o
		case "PodDisruptionBudget/etcdfed-spoke":
			pdb = o
		case "Service/" + install.SpokeService:
			dnsSvc = o
		case "Service/" + install.SpokeGossipService:
			gossipSvc = o
		}
	}
	if d == nil || pdb == nil || dnsSvc == nil || gossipSvc == nil {
		t.Fatalf("%s: spoke Deployment %v, PodDisruptionBudget %v, DNS Service %v, gossip Service %v", name, d != nil, pdb != nil, dnsSvc != nil, gossipSvc != nil)
	}
	if n, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); fmt.Sprint(n) != "2" {
		t.Errorf("%s: spoke replicas %v, want 2", name, n)
	}
	strategy, _, _ := unstructured.NestedMap(d.Object, "spec", "strategy")
	if fmt.Sprint(strategy) != "map[rollingUpdate:map[maxSurge:1 maxUnavailable:0] type:RollingUpdate]" {
		t.Errorf("%s: spoke strategy %v", name, strategy)
	}
	terms, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	if s := fmt.Sprint(terms); !strings.Contains(s, "kubernetes.io/hostname") || !strings.Contains(s, "topology.kubernetes.io/zone") {
		t.Errorf("%s: spoke anti-affinity %v", name, terms)
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if s, _, _ := unstructured.NestedFieldNoCopy(cs[0].(map[string]any), "lifecycle", "preStop", "sleep", "seconds"); fmt.Sprint(s) != "5" {
		t.Errorf("%s: spoke preStop sleep %v, want 5 s of DNS answers while the endpoint goes", name, s)
	}
	if n, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "minAvailable"); fmt.Sprint(n) != "1" {
		t.Errorf("%s: spoke PodDisruptionBudget minAvailable %v", name, n)
	}
	portNames := func(svc *unstructured.Unstructured) string {
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		var out []string
		for _, p := range ports {
			out = append(out, fmt.Sprint(p.(map[string]any)["name"]))
		}
		return strings.Join(out, ",")
	}
	if got := portNames(dnsSvc); got != "dns-udp,dns-tcp" {
		t.Errorf("%s: DNS Service ports %s", name, got)
	}
	if got := portNames(gossipSvc); got != "gossip-udp,gossip-tcp" {
		t.Errorf("%s: gossip Service ports %s", name, got)
	}
	if sel, _, _ := unstructured.NestedStringMap(dnsSvc.Object, "spec", "selector"); len(sel) != 1 {
		t.Errorf("%s: DNS Service selector %v: want every replica", name, sel)
	}
	if sel, _, _ := unstructured.NestedStringMap(gossipSvc.Object, "spec", "selector"); sel[app.LabelLeader] != "true" {
		t.Errorf("%s: gossip Service selector %v: want the leader (%s)", name, sel, app.LabelLeader)
	}
}

// TestPackagesInstallIntoApiservers: every rendering applies server-side
// to a real apiserver (schema, defaults and CEL of the objects), twice
// (the second writes nothing). The Prometheus Operator's kinds are left
// out: their CRDs are the operator's.
func TestPackagesInstallIntoApiservers(t *testing.T) {
	r := renderings(t)
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	cs := installtest.Clusters(t, "packages")
	c := cs[0].Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		for round := 1; round <= 2; round++ {
			changed := 0
			for _, o := range r[n] {
				if o.GroupVersionKind().Group == "monitoring.coreos.com" {
					continue
				}
				before := &unstructured.Unstructured{}
				before.SetGroupVersionKind(o.GroupVersionKind())
				_ = c.Get(ctx, client.ObjectKeyFromObject(o), before)
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fmt.Sprintf("packages-test-%d", i)), client.ForceOwnership); err != nil {
					t.Fatalf("%s: apply %s %s: %v", n, o.GetKind(), o.GetName(), err)
				}
				after := &unstructured.Unstructured{}
				after.SetGroupVersionKind(o.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKeyFromObject(o), after); err != nil {
					t.Fatal(err)
				}
				if before.GetResourceVersion() != after.GetResourceVersion() {
					changed++
					if round == 2 {
						t.Logf("%s: %s %s changed on the second apply", n, o.GetKind(), o.GetName())
					}
				}
			}
			if round == 2 && changed > 0 {
				t.Errorf("%s: applying it again changed %d objects", n, changed)
			}
		}
		t.Logf("%s: %d objects applied", n, len(r[n]))
	}
}

// TestPackagesGrantNoMoreThanConfigRBAC: every Role and ClusterRole of
// every rendering is one of config/rbac's, with no rule granting a verb
// that config/rbac does not grant on the same resource; every binding
// binds config's roles to config's ServiceAccounts.
func TestPackagesGrantNoMoreThanConfigRBAC(t *testing.T) {
	allowed := map[string][]rbacv1.PolicyRule{} // "Kind ns/name" -> rules
	sas := map[string]bool{}
	for _, load := range []func(string) ([]client.Object, error){hubrbac.Objects, hubmemberrbac.Objects, spokerbac.Objects} {
		objs, err := load(install.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			switch o := o.(type) {
			case *rbacv1.Role:
				allowed["Role "+o.Namespace+"/"+o.Name] = append(allowed["Role "+o.Namespace+"/"+o.Name], o.Rules...)
			case *rbacv1.ClusterRole:
				allowed["ClusterRole /"+o.Name] = append(allowed["ClusterRole /"+o.Name], o.Rules...)
			default:
				if o.GetObjectKind().GroupVersionKind().Kind == "ServiceAccount" || fmt.Sprintf("%T", o) == "*v1.ServiceAccount" {
					sas[o.GetNamespace()+"/"+o.GetName()] = true
				}
			}
		}
	}
	for n, objs := range renderings(t) {
		for _, o := range objs {
			key := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
			switch o.GetKind() {
			case "Role", "ClusterRole":
				var role rbacv1.ClusterRole // Role and ClusterRole share rules
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
					t.Fatal(err)
				}
				want, ok := allowed[key]
				if !ok {
					t.Errorf("%s: %s is not one of config/rbac's roles", n, key)
					continue
				}
				for _, rule := range role.Rules {
					if extra := beyond(rule, want); len(extra) > 0 {
						t.Errorf("%s: %s grants %v beyond config/rbac", n, key, extra)
					}
				}
			case "RoleBinding", "ClusterRoleBinding":
				var b rbacv1.RoleBinding
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
					t.Fatal(err)
				}
				ref := b.RoleRef.Kind + " /" + b.RoleRef.Name
				if b.RoleRef.Kind == "Role" {
					ref = "Role " + b.Namespace + "/" + b.RoleRef.Name
				}
				if _, ok := allowed[ref]; !ok {
					t.Errorf("%s: %s binds %s, not one of config/rbac's roles", n, key, ref)
				}
				for _, s := range b.Subjects {
					if s.Kind != rbacv1.ServiceAccountKind || !sas[s.Namespace+"/"+s.Name] {
						t.Errorf("%s: %s binds %s %s/%s, not one of config/rbac's ServiceAccounts", n, key, s.Kind, s.Namespace, s.Name)
					}
				}
			}
		}
	}
}

// beyond returns the (group, resource, verb) triples rule grants that no
// rule of want grants, resource names included.
func beyond(rule rbacv1.PolicyRule, want []rbacv1.PolicyRule) []string {
	var extra []string
	for _, g := range rule.APIGroups {
		for _, r := range rule.Resources {
			for _, v := range rule.Verbs {
				ok := false
				for _, w := range want {
					if covers(w.APIGroups, g) && covers(w.Resources, r) && covers(w.Verbs, v) &&
						(len(w.ResourceNames) == 0 || (len(rule.ResourceNames) > 0 && subset(rule.ResourceNames, w.ResourceNames))) {
						ok = true
						break
					}
				}
				if !ok {
					extra = append(extra, g+"/"+r+":"+v)
				}
			}
		}
	}
	return extra
}

func covers(list []string, v string) bool {
	return slices.Contains(list, v) || slices.Contains(list, "*")
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
