package localenv

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
)

// kubectl runs bin/kubectl against a cluster as its admin, with stdin.
func (e *Env) kubectl(ctx context.Context, cluster string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "kubectl"), append([]string{"--kubeconfig", e.state.KubeconfigPath(cluster)}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s (%s): %w: %s", strings.Join(args, " "), cluster, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// addonsTmpl is what a cluster needs besides its nodes, as kubeadm or a
// cloud would set it up: the default StorageClass (local volumes of the
// cloud controller, bound where the first pod lands) and CoreDNS (a
// Deployment behind the kube-dns Service at the cluster DNS address). The
// Corefile is kubeadm's without the upstream forward (the nodes have no
// resolver to forward to); the ring's domains are added once the spokes
// run (see corefile).
var addonsTmpl = template.Must(template.New("addons").Parse(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: {{.Provisioner}}
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
# The apiserver's identity towards kubelets (logs, exec, port-forward),
# as kubeadm binds it.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kube-apiserver-kubelet-client"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: {{.KubeletClient}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects:
- {kind: ServiceAccount, name: coredns, namespace: kube-system}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: {{.ClusterDNS}}
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
  - {name: metrics, port: 9153, protocol: TCP, targetPort: 9153}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      tolerations:
      - {key: CriticalAddonsOnly, operator: Exists}
      containers:
      - name: coredns
        image: {{.Image}}
        imagePullPolicy: IfNotPresent
        args: [-conf, /etc/coredns/Corefile]
        env:
        - {name: GOGC, value: "{{.GOGC}}"}
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        - {name: metrics, containerPort: 9153, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          initialDelaySeconds: 60
          periodSeconds: 10
        resources:
          requests: {cpu: 50m, memory: 40Mi}
          limits: {memory: 170Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {add: [NET_BIND_SERVICE], drop: [ALL]}
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap: {name: coredns}
`))

// corefile is the cluster's Corefile: the cluster's own names, and when
// upstreams is not empty one server block that forwards the ring's
// domains to the spokes' DNS, between the markers hack/kind/up.sh uses.
func corefile(domains, upstreams []string, policy string) string {
	var b strings.Builder
	b.WriteString(`.:53 {
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
    cache 30
    loop
    reload
    loadbalance
}
`)
	if len(upstreams) > 0 {
		zones := make([]string, len(domains))
		for i, d := range domains {
			zones[i] = strings.TrimSuffix(d, ".") + ":53"
		}
		fmt.Fprintf(&b, `
# etcdfed BEGIN: the ring's domains, served by the spokes (the local environment)
%s {
    errors
    cache 5
    forward . %s {
        policy %s
    }
}
# etcdfed END
`, strings.Join(zones, " "), strings.Join(upstreams, " "), policy)
	}
	return b.String()
}

// installAddons applies the StorageClass and CoreDNS to a cluster and
// writes its Corefile.
func (e *Env) installAddons(ctx context.Context, c ClusterState) error {
	var buf bytes.Buffer
	if err := addonsTmpl.Execute(&buf, map[string]string{
		"Provisioner": realnode.Provisioner, "ClusterDNS": addr.RealClusterDNS, "Image": CoreDNSImage, "GOGC": realnode.LeanGOGC, "KubeletClient": kubeletClientUser,
	}); err != nil {
		return err
	}
	if _, err := e.kubectl(ctx, c.Name, buf.Bytes(), "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		return err
	}
	return e.setCorefile(ctx, c, corefile(nil, nil, ""), false)
}

// setCorefile writes the coredns ConfigMap and, when restart is set and it
// changed, restarts CoreDNS (its reload plugin would see the change only
// after the kubelet refreshed the volume, a minute or so).
func (e *Env) setCorefile(ctx context.Context, c ClusterState, content string, restart bool) error {
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(c.APIServer))
	if err != nil {
		return err
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err == nil && cm.Data["Corefile"] == content {
		return nil
	}
	manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: coredns, namespace: kube-system}\ndata:\n  Corefile: |\n%s",
		indent(content, "    "))
	if _, err := e.kubectl(ctx, c.Name, []byte(manifest), "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		return err
	}
	if !restart {
		return nil
	}
	_, err = e.kubectl(ctx, c.Name, nil, "-n", "kube-system", "rollout", "restart", "deployment/coredns")
	return err
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// waitDeployment waits until a Deployment has its replicas updated and
// available.
func (e *Env) waitDeployment(ctx context.Context, c ClusterState, ns, name string, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(c.APIServer))
	if err != nil {
		return err
	}
	last := "not found"
	err = waitFor(ctx, timeout, fmt.Sprintf("deployment %s/%s in %s", ns, name, c.Name), func() (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = deploymentState(d)
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.AvailableReplicas == want && d.Status.Replicas == want, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s)%s", err, last, podsOf(ctx, cs, ns, name))
	}
	return nil
}

// podsOf describes the pods of a Deployment: phase, and each container's
// waiting or last termination reason and message (what a failed wait
// needs to say).
func podsOf(ctx context.Context, cs kubernetes.Interface, ns, name string) string {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || d.Spec.Selector == nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return ""
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "; pod %s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := c.State.Waiting; w != nil {
				fmt.Fprintf(&b, ", %s waiting: %s %s", c.Name, w.Reason, w.Message)
			}
			if t := c.LastTerminationState.Terminated; t != nil {
				fmt.Fprintf(&b, ", %s last exit %d %s: %s", c.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			}
		}
	}
	return b.String()
}

func deploymentState(d *appsv1.Deployment) string {
	s := fmt.Sprintf("%d replicas, %d updated, %d available", d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas)
	for _, c := range d.Status.Conditions {
		if c.Status != "True" {
			s += fmt.Sprintf("; %s: %s", c.Type, c.Message)
		}
	}
	return s
}
