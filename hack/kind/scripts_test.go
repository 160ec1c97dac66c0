// Package kind_test runs the hack/kind scripts against real kube-apiservers,
// with kind and docker replaced by small fakes: every kubectl call the
// scripts make and every `etcdfed hub install` and `etcdfed cluster join`
// (the real CLI, built from this checkout) goes to a real apiserver, so the
// packages, the flags and the idempotence are checked, and the
// registration join writes in the hub is used to reach a member cluster as
// the hub. What no apiserver does alone is played by the test: Deployments
// report rolled out, a spoke renews its Lease and publishes its DNS address
// in EtcdSpoke status, the hub reports each registration engaged with its
// spoke alive, and the EtcdCluster turns Available. Pods, images, DNS and
// networking between clusters are not exercised: that needs Docker
// (docs/kind.md).
package kind_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

const ns = "etcdfed-system"

// kindDefaultCorefile is CoreDNS's Corefile as kind writes it.
const kindDefaultCorefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`

const fakeKind = `#!/usr/bin/env bash
# kind, faked: clusters are names in $FAKE_DIR/clusters; their apiservers
# already run.
set -euo pipefail
d=$FAKE_DIR
echo "kind $*" >>"$d/calls"
name="" config=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	case ${args[$i]} in
	--name) name=${args[$((i + 1))]} ;;
	--config) config=${args[$((i + 1))]} ;;
	esac
done
case "$1 $2" in
"get clusters") cat "$d/clusters" 2>/dev/null || true ;;
"create cluster") cp "$config" "$d/create-$name.yaml"; echo "$name" >>"$d/clusters" ;;
"delete cluster") grep -vx -- "$name" "$d/clusters" >"$d/clusters.new" || true; mv "$d/clusters.new" "$d/clusters" ;;
"get kubeconfig") cat "$d/internal-$name" ;;
"get nodes") echo "$name-control-plane" ;;
"load image-archive") ;;
*) echo "fake kind: unexpected: $*" >&2; exit 1 ;;
esac
`

const fakeDocker = `#!/usr/bin/env bash
# docker, faked: a node's state is in $FAKE_DIR/state-<node> (running when
# absent), its address on the network kind in $FAKE_DIR/ip-<node> (empty:
# disconnected; absent: 172.18.0.2), the network kind's subnet in
# $FAKE_DIR/network-kind (absent: no such network; "auto": created by
# Docker's choice, where a given address is refused as Docker refuses it).
set -euo pipefail
d=$FAKE_DIR
echo "docker $*" >>"$d/calls"
state() { cat "$d/state-$1" 2>/dev/null || echo running; }
case $1 in
info | run) ;;
inspect)
	node=${!#}
	case $3 in
	*Paused*) if [[ $(state "$node") == paused ]]; then echo true; else echo false; fi ;;
	*Networks*) cat "$d/ip-$node" 2>/dev/null || echo 172.18.0.2 ;;
	*) state "$node" ;;
	esac
	;;
pause) echo paused >"$d/state-$2" ;;
unpause | start) echo running >"$d/state-$2" ;;
stop) echo exited >"$d/state-$2" ;;
network)
	case $2 in
	ls) echo "id-bridge" ;;
	inspect)
		case ${!#} in
		kind)
			[[ -f $d/network-kind ]] || exit 1
			if [[ $* == *Containers* ]]; then echo 0; fi
			;;
		id-bridge) echo "172.17.0.0/16 " ;;
		*) exit 1 ;;
		esac
		;;
	create)
		args=("$@")
		for ((i = 0; i < ${#args[@]}; i++)); do
			if [[ ${args[$i]} == --subnet ]]; then echo "${args[$((i + 1))]}" >"$d/network-kind"; fi
		done
		;;
	rm) rm -f "$d/network-kind" ;;
	disconnect) echo >"$d/ip-$4" ;;
	connect)
		node=${!#}
		if [[ $3 == --ip ]]; then
			if [[ $(cat "$d/network-kind") == auto ]]; then
				echo "Error response from daemon: user specified IP address is supported only when connecting to networks with user configured subnets" >&2
				exit 1
			fi
			echo "$4" >"$d/ip-$node"
		else
			echo 172.18.0.99 >"$d/ip-$node"
		fi
		;;
	*) echo "fake docker: unexpected: $*" >&2; exit 1 ;;
	esac
	;;
*) echo "fake docker: unexpected: $*" >&2; exit 1 ;;
esac
`

const fakeEtcdfed = `#!/usr/bin/env bash
# etcdfed: the real CLI ($REAL_ETCDFED), but client-cert, faked: it writes
# the three files into --out.
set -euo pipefail
echo "etcdfed $*" >>"$FAKE_DIR/calls"
[[ $1 == client-cert ]] || exec "$REAL_ETCDFED" "$@"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	[[ ${args[$i]} == --out ]] && out=${args[$((i + 1))]}
done
mkdir -p "$out"
for f in ca.crt client.crt client.key; do echo "fake $f" >"$out/$f"; done
`

type world struct {
	// images stands for out/images: make images' images.txt and tarballs.
	images   string
	t        *testing.T
	root     string
	dir      string
	env      []string
	clusters map[string]*testenv.Cluster // by kind cluster name
	members  []string

	mu      sync.Mutex
	etcdctl *corev1.Pod // the last etcdctl pod seen in the hub

	// quorumRounds counts the fake controllers' rounds since the
	// EtcdCluster turned Available with only a quorum of its members
	// ready (makeAvailable).
	quorumRounds int
}

// TestScripts runs up.sh and etcdctl.sh, up.sh again (it changes
// nothing), zone drills with fail-zone.sh and restore-zone.sh (after
// --stop it re-runs up.sh, here with a new image: the hub and the spokes
// restart, nothing else), and down.sh.
func TestScripts(t *testing.T) {
	testenv.SkipIfShort(t, "kube-apiserver, bash and kubectl")
	// kubectl is built at the pinned version into bin/ by make tools.
	tools, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", tools+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, tool := range []string{"bash", "kubectl", "awk", "sed", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH: the hack/kind scripts run it", tool)
		}
	}
	w := newWorld(t, "etcdfed-hub", "etcdfed-member-1", "etcdfed-member-2")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.fakeControllers(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	if err := w.runErr("hack/kind/up.sh", "--skip-build", "--members", "2", "--two-zones", "3"); err == nil {
		t.Error("up.sh accepted --two-zones 3 with 2 member clusters")
	}
	out := w.run("hack/kind/up.sh", "--skip-build", "--members", "2", "--replicas", "3", "--two-zones", "2")
	hub := w.clusters["etcdfed-hub"].Client
	bg := context.Background()

	// kind: one cluster per name, member 1 labelled zone-1; member 2 (with
	// --two-zones 2) its control plane zone-2a and a worker zone-2b, its
	// control plane untainted so that both zones take pods.
	for m, want := range map[string]string{
		"etcdfed-member-1": "nodes:\n- role: control-plane\n  labels:\n    topology.kubernetes.io/zone: zone-1\n",
		"etcdfed-member-2": "nodes:\n- role: control-plane\n  labels:\n    topology.kubernetes.io/zone: zone-2a\n" +
			"- role: worker\n  labels:\n    topology.kubernetes.io/zone: zone-2b\n",
	} {
		cfg, err := os.ReadFile(filepath.Join(w.dir, "create-"+m+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(cfg), want) {
			t.Errorf("kind config of %s does not end in\n%s\n%s", m, want, cfg)
		}
	}
	for m, tainted := range map[string]bool{"etcdfed-member-1": true, "etcdfed-member-2": false} {
		node := &corev1.Node{}
		if err := w.clusters[m].Client.Get(bg, client.ObjectKey{Name: m + "-control-plane"}, node); err != nil {
			t.Fatal(err)
		}
		got := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node-role.kubernetes.io/control-plane" })
		if got != tainted {
			t.Errorf("%s: control plane tainted %t (%v), want %t", m, got, node.Spec.Taints, tainted)
		}
	}
	calls := w.calls()
	for _, c := range []string{
		"kind load image-archive " + w.images + "/etcdfed.tar --name etcdfed-hub",
		"kind load image-archive " + w.images + "/etcd-3.7.tar --name etcdfed-hub",
		"kind load image-archive " + w.images + "/etcdfed.tar --name etcdfed-member-2",
	} {
		if !strings.Contains(calls, c) {
			t.Errorf("no call %q in:\n%s", c, calls)
		}
	}

	// Member clusters: spoke, its ConfigMap, one gossip key, CoreDNS.
	var key []byte
	for i, m := range w.members {
		c := w.clusters[m].Client
		node := &corev1.Node{}
		if err := c.Get(bg, client.ObjectKey{Name: m + "-control-plane"}, node); err != nil {
			t.Fatal(err)
		}
		// kind labels the nodes from its config (the fake does not); up.sh
		// labels a one-zone cluster's nodes again.
		if z := node.Labels[corev1.LabelTopologyZone]; i == 0 && z != "zone-1" || i == 1 && z != "" {
			t.Errorf("%s: node zone %q", m, z)
		}
		dep := &appsv1.Deployment{}
		if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: "etcdfed-spoke"}, dep); err != nil {
			t.Fatal(err)
		}
		ctr := dep.Spec.Template.Spec.Containers[0]
		if ctr.Image != kindImage || ctr.Command[0] != "/usr/local/bin/spoke" || dep.Spec.Template.Annotations["etcdfed.dev/image-id"] != w.imageID() {
			t.Errorf("%s: spoke image %s, command %v, annotations %v", m, ctr.Image, ctr.Command, dep.Spec.Template.Annotations)
		}
		env := map[string]string{}
		for _, e := range ctr.Env {
			env[e.Name] = e.Value
		}
		if env["ETCDFED_SPOKE_DNS_ADVERTISE_ADDRESS"] != "$(HOST_IP):30053" || env["ETCDFED_SPOKE_GOSSIP_ADVERTISE"] != "$(HOST_IP):30946" {
			t.Errorf("%s: spoke env %v", m, ctr.Env)
		}
		// DNS on a Service to every ready replica, gossip on one to the
		// leader, both on NodePorts of the node's IP.
		svc := &corev1.Service{} // the DNS Service, which CoreDNS forwards to
		if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: "etcdfed-spoke"}, svc); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"etcdfed-spoke": "dns", "etcdfed-spoke-gossip": "gossip"} {
			svc := &corev1.Service{}
			if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
				t.Fatal(err)
			}
			if svc.Spec.Type != corev1.ServiceTypeNodePort || len(svc.Spec.Ports) != 2 {
				t.Errorf("%s: Service %s %s with ports %+v", m, name, svc.Spec.Type, svc.Spec.Ports)
			}
			for _, p := range svc.Spec.Ports {
				kind := strings.Split(p.Name, "-")[0]
				if wantPort := map[string]int32{"dns": 30053, "gossip": 30946}[kind]; kind != want || p.NodePort != wantPort {
					t.Errorf("%s: Service %s port %s has node port %d, want a %s port on %d", m, name, p.Name, p.NodePort, want, wantPort)
				}
			}
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: ctr.EnvFrom[0].ConfigMapRef.Name}, cm); err != nil || cm.Data["CLUSTER_NAME"] != m || cm.Data["GOSSIP_PROFILE"] != "lan" || cm.Data["HELPER_IMAGE"] != kindImage {
			t.Errorf("%s: the spoke's ConfigMap %v (%v)", m, cm.Data, err)
		}
		sec := &corev1.Secret{}
		if err := c.Get(bg, client.ObjectKey{Namespace: ns, Name: "etcdfed-gossip"}, sec); err != nil {
			t.Fatal(err)
		}
		if len(sec.Data["key"]) != 32 || (key != nil && !bytes.Equal(key, sec.Data["key"])) {
			t.Errorf("%s: gossip key of %d bytes, same as the others: %v", m, len(sec.Data["key"]), key == nil || bytes.Equal(key, sec.Data["key"]))
		}
		key = sec.Data["key"]

		// CoreDNS: this cluster's spoke first, then the other's.
		upstreams := []string{svc.Spec.ClusterIP + ":53"}
		for j := range w.members {
			if j != i {
				upstreams = append(upstreams, spokeDNS(j))
			}
		}
		w.expectForward(m, "sequential", upstreams)
	}
	w.expectForward("etcdfed-hub", "random", []string{spokeDNS(0), spokeDNS(1)})

	// Hub: Deployment, the RoleBinding in the sample's namespace, the
	// EtcdCluster with the replicas asked for.
	dep := &appsv1.Deployment{}
	if err := hub.Get(bg, client.ObjectKey{Namespace: ns, Name: "etcdfed-hub"}, dep); err != nil {
		t.Fatal(err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != kindImage {
		t.Errorf("hub image %s", img)
	}
	if err := hub.Get(bg, client.ObjectKey{Namespace: "default", Name: "etcdfed-hub"}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}}); err != nil {
		t.Errorf("hub RoleBinding in default: %v", err)
	}
	ec := &etcdfedv1.EtcdCluster{}
	if err := hub.Get(bg, client.ObjectKey{Namespace: "default", Name: "main"}, ec); err != nil {
		t.Fatal(err)
	}
	if ec.Spec.Replicas != 3 || ec.Spec.Expose.Type != etcdfedv1.ExposeNodePort || ec.Spec.DNS.Domain != "etcd.kind.local" {
		t.Errorf("EtcdCluster spec %+v", ec.Spec)
	}
	// up.sh returns once every member is ready, not at the first
	// Available, which a quorum gives (on kind: 3 of 5 ready, in two of
	// the three zones).
	if ec.Status.ReadyMembers != ec.Spec.Replicas || !strings.Contains(out, "Available with 3 ready members") {
		t.Errorf("up.sh returned with %d of %d members ready (%s):\n%s", ec.Status.ReadyMembers, ec.Spec.Replicas, ec.Status.MemberSummary, out)
	}
	if !strings.Contains(out, "hack/kind/etcdctl.sh member list") {
		t.Errorf("up.sh did not say how to run etcdctl:\n%s", out)
	}

	// The registered kubeconfigs reach each member cluster as the hub,
	// with the hub-member role and nothing more.
	for _, m := range w.members {
		sec := &corev1.Secret{}
		if err := hub.Get(bg, client.ObjectKey{Namespace: ns, Name: m}, sec); err != nil {
			t.Fatal(err)
		}
		if sec.Labels["sigs.k8s.io/multicluster-runtime-kubeconfig"] != "true" {
			t.Errorf("kubeconfig Secret %s labels %v", m, sec.Labels)
		}
		cfg, err := registry.RESTConfig(sec)
		if err != nil {
			t.Fatalf("registration of %s: %v", m, err)
		}
		if cfg.Host != w.clusters[m].Config.Host {
			t.Errorf("kubeconfig of %s names %s, want the internal address %s", m, cfg.Host, w.clusters[m].Config.Host)
		}
		as, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		if err := as.List(bg, &etcdfedv1.EtcdMemberList{}, client.InNamespace(ns)); err != nil {
			t.Errorf("as the hub in %s: list EtcdMembers: %v", m, err)
		}
		if err := as.List(bg, &corev1.PodList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
			t.Errorf("as the hub in %s: list pods: %v, want Forbidden", m, err)
		}
	}

	// etcdctl.sh: a pod with the etcd image, the client certificate and
	// the endpoints. It cannot run here (no kubelet), so only the pod it
	// asked for is checked.
	out, _ = w.exec("hack/kind/etcdctl.sh", "member", "list", "-w", "table")
	w.mu.Lock()
	pod := w.etcdctl
	w.mu.Unlock()
	if pod == nil {
		t.Fatalf("etcdctl.sh created no pod:\n%s", out)
	}
	ctr := pod.Spec.Containers[0]
	if ctr.Image != "gcr.io/etcd-development/etcd:v"+etcdversion.Default().String() || strings.Join(append(ctr.Command, ctr.Args...), " ") != "/usr/local/bin/etcdctl member list -w table" {
		t.Errorf("etcdctl pod runs %s: %v %v", ctr.Image, ctr.Command, ctr.Args)
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	if env["ETCDCTL_ENDPOINTS"] != "https://main-0.etcd.kind.local:31379,https://main-1.etcd.kind.local:31380" || env["ETCDCTL_CERT"] != "/certs/client.crt" {
		t.Errorf("etcdctl pod env %v", env)
	}
	if len(ctr.VolumeMounts) != 1 || ctr.VolumeMounts[0].MountPath != "/certs" || len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Secret == nil || pod.Spec.Volumes[0].Secret.SecretName != "main-etcdctl" {
		t.Errorf("etcdctl pod mounts %+v, volumes %+v", ctr.VolumeMounts, pod.Spec.Volumes)
	}
	certs := &corev1.Secret{}
	if err := hub.Get(bg, client.ObjectKey{Namespace: "default", Name: "main-etcdctl"}, certs); err != nil {
		t.Fatal(err)
	}
	if string(certs.Data["client.key"]) != "fake client.key\n" || len(certs.Data) != 3 {
		t.Errorf("etcdctl Secret holds %v", certs.Data)
	}
	if !strings.Contains(w.calls(), "etcdfed client-cert main -n default --context kind-etcdfed-hub --out ") {
		t.Errorf("etcdfed client-cert not called as expected:\n%s", w.calls())
	}

	// Again: nothing changes, nothing restarts.
	gens := w.generations()
	w.run("hack/kind/up.sh", "--skip-build", "--members", "2", "--replicas", "3")
	if after := w.generations(); !equalMaps(gens, after) {
		t.Errorf("a second run changed Deployments: generations %v, then %v", gens, after)
	}
	for _, m := range w.members {
		sec := &corev1.Secret{}
		if err := w.clusters[m].Client.Get(bg, client.ObjectKey{Namespace: ns, Name: "etcdfed-gossip"}, sec); err != nil || !bytes.Equal(sec.Data["key"], key) {
			t.Errorf("%s: the gossip key changed on a second run (%v)", m, err)
		}
	}
	if strings.Count(w.calls(), "kind create cluster") != 3 {
		t.Errorf("clusters created again:\n%s", w.calls())
	}

	// A zone drill: pause, then back.
	w.run("hack/kind/fail-zone.sh", "etcdfed-member-1")
	if s := w.nodeState("etcdfed-member-1-control-plane"); s != "paused" {
		t.Errorf("after fail-zone: node %s", s)
	}
	w.run("hack/kind/fail-zone.sh", "etcdfed-member-1") // idempotent
	w.run("hack/kind/restore-zone.sh", "etcdfed-member-1")
	if s := w.nodeState("etcdfed-member-1-control-plane"); s != "running" {
		t.Errorf("after restore-zone: node %s", s)
	}
	if err := w.runErr("hack/kind/fail-zone.sh", "etcdfed-hub"); err == nil {
		t.Error("fail-zone.sh accepted the hub cluster")
	}

	// Cut off the network: restore-zone.sh reconnects the node at the
	// address it had, on the network up.sh created with a subnet (a
	// 172.N.0.0/16 no network and no route of the machine uses: not the
	// fake bridge's 172.17), and up.sh need not run again.
	if data, err := os.ReadFile(filepath.Join(w.dir, "network-kind")); err != nil ||
		!regexp.MustCompile(`^172\.(1[89]|2[0-9]|3[01])\.0\.0/16$`).Match(bytes.TrimSpace(data)) {
		t.Errorf("up.sh created the network kind with subnet %q (%v), want a free 172.N.0.0/16 beside the bridge's 172.17", data, err)
	}
	w.run("hack/kind/fail-zone.sh", "etcdfed-member-1", "--cut")
	if ip := w.nodeIP("etcdfed-member-1-control-plane"); ip != "" {
		t.Errorf("after fail-zone --cut: node still at %q", ip)
	}
	w.run("hack/kind/fail-zone.sh", "etcdfed-member-1", "--cut") // idempotent
	out = w.run("hack/kind/restore-zone.sh", "etcdfed-member-1")
	if ip := w.nodeIP("etcdfed-member-1-control-plane"); ip != "172.18.0.2" {
		t.Errorf("after restore-zone: node at %q, want its old address 172.18.0.2", ip)
	}
	if strings.Contains(out, "re-running hack/kind/up.sh") {
		t.Errorf("restore-zone.sh re-ran up.sh although the node came back at its address:\n%s", out)
	}
	// On a network kind made by Docker's choice, the node comes back
	// elsewhere and restore-zone.sh refreshes what depends on addresses.
	if err := os.WriteFile(filepath.Join(w.dir, "network-kind"), []byte("auto\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.run("hack/kind/fail-zone.sh", "etcdfed-member-1", "--cut")
	out = w.run("hack/kind/restore-zone.sh", "etcdfed-member-1")
	if ip := w.nodeIP("etcdfed-member-1-control-plane"); ip != "172.18.0.99" || !strings.Contains(out, "re-running hack/kind/up.sh") {
		t.Errorf("after restore-zone on a network without a configured subnet: node at %q, up.sh re-run: %t\n%s",
			ip, strings.Contains(out, "re-running hack/kind/up.sh"), out)
	}

	// Stopped instead: restore-zone.sh re-runs up.sh. With a new image
	// built meanwhile, that restarts the hub and the spokes, and nothing
	// else.
	w.run("hack/kind/fail-zone.sh", "etcdfed-member-2", "--stop")
	if s := w.nodeState("etcdfed-member-2-control-plane"); s != "exited" {
		t.Errorf("after fail-zone --stop: node %s", s)
	}
	gens = w.generations()
	w.writeImages("image 2") // make images built a new etcdfed image
	out = w.run("hack/kind/restore-zone.sh")
	if !strings.Contains(out, "re-running hack/kind/up.sh") {
		t.Errorf("restore-zone.sh after --stop did not re-run up.sh:\n%s", out)
	}
	after := w.generations()
	for k, g := range gens {
		restarted := after[k] != g
		wantRestart := strings.HasSuffix(k, "/etcdfed-spoke") || strings.HasSuffix(k, "/etcdfed-hub")
		if restarted != wantRestart {
			t.Errorf("new image: %s generation %d -> %d", k, g, after[k])
		}
	}
	ec = &etcdfedv1.EtcdCluster{}
	if err := hub.Get(bg, client.ObjectKey{Namespace: "default", Name: "main"}, ec); err != nil || ec.Spec.Replicas != 3 {
		t.Errorf("after restore-zone: EtcdCluster replicas %d (%v)", ec.Spec.Replicas, err)
	}

	w.run("hack/kind/down.sh")
	if data, _ := os.ReadFile(filepath.Join(w.dir, "clusters")); len(bytes.TrimSpace(data)) != 0 {
		t.Errorf("clusters left after down.sh: %s", data)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "network-kind")); err == nil {
		t.Error("down.sh left the docker network kind")
	}
	w.run("hack/kind/down.sh") // nothing to delete
}

func spokeDNS(i int) string { return fmt.Sprintf("172.18.0.%d:30053", 10+i) }

func newWorld(t *testing.T, names ...string) *world {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := testenv.Start(context.Background(), testenv.Options{WithoutCRDs: true}, names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		}
	})
	w := &world{t: t, root: root, dir: t.TempDir(), clusters: map[string]*testenv.Cluster{}}
	w.images = filepath.Join(w.dir, "images")
	w.writeImages("image 1")
	kubeconfig := clientcmdapi.NewConfig()
	for i, c := range cs {
		name := names[i]
		w.clusters[name] = c
		if strings.Contains(name, "-member-") {
			w.members = append(w.members, name)
		}
		kubeconfig.Clusters[name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
		kubeconfig.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Config.CertData, ClientKeyData: c.Config.KeyData}
		kubeconfig.Contexts["kind-"+name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		internal := clientcmdapi.NewConfig()
		internal.Clusters[name] = kubeconfig.Clusters[name]
		internal.AuthInfos[name] = kubeconfig.AuthInfos[name]
		internal.Contexts[name] = kubeconfig.Contexts["kind-"+name]
		internal.CurrentContext = name
		if err := clientcmd.WriteToFile(*internal, filepath.Join(w.dir, "internal-"+name)); err != nil {
			t.Fatal(err)
		}
		w.seed(c, name)
	}
	kubeconfig.CurrentContext = "kind-" + names[0]
	if err := clientcmd.WriteToFile(*kubeconfig, filepath.Join(w.dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(w.dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The real etcdfed CLI, built from this checkout.
	real := filepath.Join(w.dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := testenv.BuildOurs(real, "etcdfed"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(real, "etcdfed"), filepath.Join(w.dir, "real-etcdfed")); err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{"kind": fakeKind, "docker": fakeDocker, "etcdfed": fakeEtcdfed} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.env = append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+filepath.Join(w.dir, "kubeconfig"),
		"HOME="+w.dir, // kubectl's discovery cache
		"FAKE_DIR="+w.dir,
		"ETCDFED_KIND_IMAGES_DIR="+w.images,
		"KIND_NODE_IMAGE=kindest/node:v1.36.3",
		"REAL_ETCDFED="+filepath.Join(w.dir, "real-etcdfed"),
		"ETCDFED_KIND_PREFIX=etcdfed",
		"ETCDFED_KIND_STATE_DIR="+filepath.Join(w.dir, "state"),
		"ETCDFED_KIND_TIMEOUT=2m",
		// No kubelet runs etcdctl.sh's pod here: do not wait for it.
		"ETCDFED_KIND_ETCDCTL_TIMEOUT=1",
	)
	return w
}

// seed creates what kind gives every cluster: a node and CoreDNS.
func (w *world) seed(c *testenv.Cluster, name string) {
	ctx := context.Background()
	objs := []client.Object{
		&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-control-plane"},
			// kind taints the control plane of a cluster with workers.
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}},
		},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}, Data: map[string]string{"Corefile": kindDefaultCorefile}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "kube-dns"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Image: "registry.k8s.io/coredns/coredns"}}},
				},
			},
		},
	}
	for _, o := range objs {
		if err := c.Client.Create(ctx, o); err != nil {
			w.t.Fatal(err)
		}
	}
}

// fakeControllers plays the parts no bare apiserver plays, until ctx ends.
func (w *world) fakeControllers(ctx context.Context) {
	for ctx.Err() == nil {
		for name, c := range w.clusters {
			w.registerNodes(ctx, name, c)
			w.rollOut(ctx, c)
			if i := indexOf(w.members, name); i >= 0 {
				w.publishSpoke(ctx, c, i)
			} else {
				w.reportRegistrations(ctx, c)
				w.makeAvailable(ctx, c)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// registerNodes plays the kubelets of a cluster kind created: the workers
// its config asks for register (kind names them <name>-worker,
// <name>-worker2, ...; the control plane is seeded), and every node is
// Ready.
func (w *world) registerNodes(ctx context.Context, name string, c *testenv.Cluster) {
	cfg, err := os.ReadFile(filepath.Join(w.dir, "create-"+name+".yaml"))
	if err != nil {
		return // not created yet
	}
	for i := range strings.Count(string(cfg), "- role: worker") {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-worker"}}
		if i > 0 {
			node.Name += strconv.Itoa(i + 1)
		}
		if err := c.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return
		}
	}
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes); err != nil {
		return
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady }) {
			continue
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
		_ = c.Client.Status().Update(ctx, n)
	}
}

// rollOut: every Deployment reports its current generation rolled out.
func (w *world) rollOut(ctx context.Context, c *testenv.Cluster) {
	var list appsv1.DeploymentList
	if err := c.Client.List(ctx, &list); err != nil {
		return
	}
	for i := range list.Items {
		d := &list.Items[i]
		if d.Status.ObservedGeneration == d.Generation {
			continue
		}
		r := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		_ = c.Client.Status().Update(ctx, d)
	}
}

// reportRegistrations: the hub's part, reduced to what `etcdfed cluster
// join` waits for: each registration engaged, its spoke seen.
func (w *world) reportRegistrations(ctx context.Context, c *testenv.Cluster) {
	var list corev1.SecretList
	if err := c.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{registry.KubeconfigSecretLabel: "true"}); err != nil {
		return
	}
	for i := range list.Items {
		s := &list.Items[i]
		if st, ok := registration.StatusOf(s.Annotations); ok && st.Engaged && st.Spoke == registration.SpokeAlive {
			continue
		}
		patched := s.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		maps.Copy(patched.Annotations, registration.Status{Engaged: true, Spoke: registration.SpokeAlive}.Annotations())
		_ = c.Client.Patch(ctx, patched, client.MergeFrom(s))
	}
}

// publishSpoke: a running spoke creates its EtcdSpoke and reports its DNS
// address.
func (w *world) publishSpoke(ctx context.Context, c *testenv.Cluster, i int) {
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcdfed-spoke"}, &appsv1.Deployment{}); err != nil {
		return
	}
	// Its liveness Lease, renewed on every round.
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spoke"}}
	now := metav1.NewMicroTime(time.Now())
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); apierrors.IsNotFound(err) {
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("spoke-0"), RenewTime: &now}
		_ = c.Client.Create(ctx, lease)
	} else if err == nil {
		lease.Spec.RenewTime = &now
		_ = c.Client.Update(ctx, lease)
	}
	sp := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: etcdfedv1.SpokeObjectName}}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(sp), sp); apierrors.IsNotFound(err) {
		if err := c.Client.Create(ctx, sp); err != nil {
			return
		}
	} else if err != nil {
		return
	}
	if len(sp.Status.DNSAddresses) > 0 {
		return
	}
	sp.Status.DNSAddresses = []string{spokeDNS(i)}
	_ = c.Client.Status().Update(ctx, sp)
}

// quorumHold is how many rounds of the fake controllers (200ms each) the
// EtcdCluster stays Available with only a quorum of its members ready.
const quorumHold = 10

// makeAvailable: the hub's part, reduced to what up.sh waits for. As the
// hub did on kind, the ring turns Available with a quorum of its members
// ready, and the others become ready a moment later (quorumHold rounds).
func (w *world) makeAvailable(ctx context.Context, c *testenv.Cluster) {
	ec := &etcdfedv1.EtcdCluster{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "main"}, ec); err != nil {
		return
	}
	w.captureEtcdctl(ctx, c)
	replicas := ec.Spec.Replicas
	ready := replicas
	if !meta.IsStatusConditionTrue(ec.Status.Conditions, etcdfedv1.ConditionAvailable) {
		ready = replicas/2 + 1
		w.quorumRounds = 0
		ec.Status.Endpoints = []string{"https://main-0.etcd.kind.local:31379", "https://main-1.etcd.kind.local:31380"}
		meta.SetStatusCondition(&ec.Status.Conditions, metav1.Condition{Type: etcdfedv1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "Quorate", Message: "test", ObservedGeneration: ec.Generation})
	} else if ec.Status.ReadyMembers == replicas {
		return
	} else if w.quorumRounds++; w.quorumRounds < quorumHold {
		return
	}
	ec.Status.ReadyMembers = ready
	ec.Status.MemberSummary = fmt.Sprintf("%d/%d", ready, replicas)
	_ = c.Client.Status().Update(ctx, ec)
}

// captureEtcdctl keeps etcdctl.sh's pod and ends it, as a kubelet would
// once etcdctl exits.
func (w *world) captureEtcdctl(ctx context.Context, c *testenv.Cluster) {
	pod := &corev1.Pod{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "etcdctl"}, pod); err != nil {
		return
	}
	w.mu.Lock()
	w.etcdctl = pod.DeepCopy()
	w.mu.Unlock()
	if pod.Status.Phase != corev1.PodSucceeded {
		pod.Status.Phase = corev1.PodSucceeded
		_ = c.Client.Status().Update(ctx, pod)
	}
}

func (w *world) runErr(script string, args ...string) error {
	_, err := w.exec(script, args...)
	return err
}

func (w *world) run(script string, args ...string) string {
	w.t.Helper()
	out, err := w.exec(script, args...)
	if err != nil {
		w.t.Fatalf("%s %v: %v\n%s", script, args, err, out)
	}
	return out
}

func (w *world) exec(script string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Dir = w.root
	cmd.Env = w.env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	w.t.Logf("%s %s: %.1fs", script, strings.Join(args, " "), time.Since(start).Seconds())
	return string(out), err
}

// kindImage is the image up.sh installs (make images' etcdfed image).
const kindImage = "ghcr.io/etcdfed/etcdfed:dev"

// writeImages writes what make images leaves in out/images: images.txt
// and the tarballs, the etcdfed one holding content.
func (w *world) writeImages(content string) {
	w.t.Helper()
	if err := os.MkdirAll(w.images, 0o755); err != nil {
		w.t.Fatal(err)
	}
	list := "etcdfed " + kindImage + " " + filepath.Join(w.images, "etcdfed.tar") + "\n" +
		"etcd-3.7 gcr.io/etcd-development/etcd:v3.7.3 " + filepath.Join(w.images, "etcd-3.7.tar") + "\n"
	for name, data := range map[string]string{"images.txt": list, "etcdfed.tar": content, "etcd-3.7.tar": "etcd"} {
		if err := os.WriteFile(filepath.Join(w.images, name), []byte(data), 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
}

// imageID is the ID up.sh stamps into the hub's and the spokes' pod
// templates: the etcdfed tarball's digest.
func (w *world) imageID() string {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.images, "etcdfed.tar"))
	if err != nil {
		w.t.Fatal(err)
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

func (w *world) calls() string {
	data, _ := os.ReadFile(filepath.Join(w.dir, "calls"))
	return string(data)
}

// nodeIP is the fake node's address on the docker network kind, "" when
// it is cut off.
func (w *world) nodeIP(node string) string {
	data, err := os.ReadFile(filepath.Join(w.dir, "ip-"+node))
	if err != nil {
		return "172.18.0.2"
	}
	return strings.TrimSpace(string(data))
}

func (w *world) nodeState(node string) string {
	data, err := os.ReadFile(filepath.Join(w.dir, "state-"+node))
	if err != nil {
		return "running"
	}
	return strings.TrimSpace(string(data))
}

// generations of every Deployment in every cluster, by cluster/namespace/name.
func (w *world) generations() map[string]int64 {
	out := map[string]int64{}
	for name, c := range w.clusters {
		var list appsv1.DeploymentList
		if err := c.Client.List(context.Background(), &list); err != nil {
			w.t.Fatal(err)
		}
		for _, d := range list.Items {
			out[name+"/"+d.Namespace+"/"+d.Name] = d.Generation
		}
	}
	return out
}

var forwardRE = regexp.MustCompile(`(?s)# etcdfed BEGIN[^\n]*\n(\S+):53 \{.*?forward \. ([^{]*)\{\s*policy (\S+)\s*\}.*?# etcdfed END`)

// expectForward: the Corefile keeps kind's server block and has exactly one
// etcdfed block forwarding the ring's domain to upstreams.
func (w *world) expectForward(cluster, policy string, upstreams []string) {
	w.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := w.clusters[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, cm); err != nil {
		w.t.Fatal(err)
	}
	cf := cm.Data["Corefile"]
	if !strings.HasPrefix(cf, strings.TrimSpace(kindDefaultCorefile)) {
		w.t.Errorf("%s: kind's server block changed:\n%s", cluster, cf)
	}
	ms := forwardRE.FindAllStringSubmatch(cf, -1)
	if len(ms) != 1 {
		w.t.Fatalf("%s: %d etcdfed blocks in the Corefile:\n%s", cluster, len(ms), cf)
	}
	if ms[0][1] != "etcd.kind.local" || strings.Join(strings.Fields(ms[0][2]), " ") != strings.Join(upstreams, " ") || ms[0][3] != policy {
		w.t.Errorf("%s: forwards %s to %q with policy %s, want %v with %s:\n%s", cluster, ms[0][1], ms[0][2], ms[0][3], upstreams, policy, cf)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func equalMaps(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
