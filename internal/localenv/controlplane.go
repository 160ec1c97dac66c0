package localenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdfed/etcdfed/config/crd"
	"github.com/etcdfed/etcdfed/internal/localenv/addr"
	"github.com/etcdfed/etcdfed/internal/localenv/proc"
)

// controlPlane is one cluster's etcd and kube-apiserver.
type controlPlane struct {
	etcd, apiserver *service
}

func (cp *controlPlane) stop(grace time.Duration) {
	if cp == nil {
		return
	}
	if cp.apiserver != nil {
		cp.apiserver.Stop(grace)
	}
	if cp.etcd != nil {
		cp.etcd.Stop(grace)
	}
}

func minimalEnv() []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, k := range []string{"HOME", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// startControlPlane starts etcd and kube-apiserver of cluster c and waits
// until the apiserver is ready.
func (e *Env) startControlPlane(ctx context.Context, c ClusterState) (*controlPlane, error) {
	p := e.plan
	ip := p.APIServer(c.Index).Addr()
	if e.state.Real() {
		ip = p.RealAPIServer(c.Index).Addr()
	}
	dir := e.state.clusterDir(c.Name)
	if err := os.MkdirAll(filepath.Join(dir, "apiserver"), 0o755); err != nil {
		return nil, err
	}
	cg := e.cgroupDir(c.Name, "infra")
	etcdURL := "http://" + p.APIEtcd(c.Index).String()
	peerURL := "http://" + p.APIEtcdPeer(c.Index).String()
	cp := &controlPlane{}
	var err error
	cp.etcd, err = startService("etcd-"+c.Name, func() proc.Spec {
		return proc.Spec{
			Name: "etcd-" + c.Name, Path: filepath.Join(e.bin, "etcd"),
			Args: []string{
				"--name=" + c.Name, "--data-dir=" + filepath.Join(dir, "etcd"),
				"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
				"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
				"--initial-cluster=" + c.Name + "=" + peerURL,
				"--unsafe-no-fsync", "--log-level=warn", "--quota-backend-bytes=2147483648",
			},
			Env: minimalEnv(), Dir: dir,
			LogPath: filepath.Join(e.state.logDir(), "etcd-"+c.Name+".log"),
			PIDFile: filepath.Join(e.state.pidDir(), "etcd-"+c.Name+".pid"),
			Cgroup:  cg,
		}
	}, true, e.log)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := e.pki.servingCert(c.Name, ip.AsSlice())
	if err != nil {
		cp.stop(0)
		return nil, fmt.Errorf("serving certificate of %s: %w", c.Name, err)
	}
	kubeletCert, kubeletKey, err := e.pki.kubeletClientCert()
	if err != nil {
		cp.stop(0)
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	var realArgs []string
	if e.state.Real() {
		realArgs = e.realAPIServerArgs(c)
	}
	cp.apiserver, err = startService("apiserver-"+c.Name, func() proc.Spec {
		return proc.Spec{
			Name: "apiserver-" + c.Name, Path: filepath.Join(e.bin, "kube-apiserver"),
			Args: overrideFlags([]string{
				"--etcd-servers=" + etcdURL,
				"--bind-address=" + ip.String(),
				fmt.Sprintf("--secure-port=%d", addr.APIServerPort),
				"--cert-dir=" + filepath.Join(dir, "apiserver"),
				"--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile,
				"--client-ca-file=" + e.pki.caFile,
				"--service-account-issuer=" + c.APIServer,
				"--service-account-key-file=" + e.pki.saPub,
				"--service-account-signing-key-file=" + e.pki.saKey,
				"--service-cluster-ip-range=10.0.0.0/24",
				"--authorization-mode=RBAC",
				// pods/log: the node agents serve kubelet's container log
				// endpoint on each node's InternalIP (a loopback address).
				"--kubelet-preferred-address-types=InternalIP",
				"--kubelet-certificate-authority=" + e.pki.caFile,
				"--kubelet-client-certificate=" + kubeletCert,
				"--kubelet-client-key=" + kubeletKey,
				"--allow-privileged=true",
				// No controller manager runs: no token controller, so no
				// ServiceAccount admission (as envtest).
				"--disable-admission-plugins=ServiceAccount",
				"--profiling=false",
				"--v=0",
			}, realArgs),
			Env: minimalEnv(), Dir: dir,
			LogPath: filepath.Join(e.state.logDir(), "apiserver-"+c.Name+".log"),
			PIDFile: filepath.Join(e.state.pidDir(), "apiserver-"+c.Name+".pid"),
			Cgroup:  cg,
		}
	}, true, e.log)
	if err != nil {
		cp.stop(0)
		return nil, err
	}
	if err := e.waitReady(ctx, c, cp); err != nil {
		cp.stop(0)
		return nil, err
	}
	return cp, nil
}

// overrideFlags returns base with every --flag that over names replaced
// by over's (and --disable-admission-plugins dropped when over enables
// plugins: real nodes want every default admission plugin).
func overrideFlags(base, over []string) []string {
	name := func(f string) string {
		if i := strings.Index(f, "="); i >= 0 {
			return f[:i]
		}
		return f
	}
	drop := map[string]bool{}
	for _, f := range over {
		drop[name(f)] = true
		if name(f) == "--enable-admission-plugins" {
			drop["--disable-admission-plugins"] = true
		}
	}
	out := make([]string, 0, len(base)+len(over))
	for _, f := range base {
		if !drop[name(f)] {
			out = append(out, f)
		}
	}
	return append(out, over...)
}

// waitReady polls the apiserver's /readyz until it answers ok.
func (e *Env) waitReady(ctx context.Context, c ClusterState, cp *controlPlane) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.pki.caPEM)
	pair, err := tls.X509KeyPair(e.pki.adminCertPEM, e.pki.adminKeyPEM)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		DialContext:     (&net.Dialer{Timeout: time.Second}).DialContext,
	}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var last string
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-cp.apiserver.Exited():
			return false, fmt.Errorf("kube-apiserver of %s exited:\n%s", c.Name, tail(filepath.Join(e.state.logDir(), "apiserver-"+c.Name+".log"), 20))
		case <-cp.etcd.Exited():
			return false, fmt.Errorf("etcd of %s exited:\n%s", c.Name, tail(filepath.Join(e.state.logDir(), "etcd-"+c.Name+".log"), 20))
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.APIServer+"/readyz", nil)
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return fmt.Errorf("kube-apiserver of %s not ready (last answer: %s): %w", c.Name, last, err)
		}
		return err
	}
	return nil
}

func tail(path string, lines int) string {
	data, _ := os.ReadFile(path)
	ls := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// setupCluster installs the CRDs and the ring namespace.
func (e *Env) setupCluster(ctx context.Context, c ClusterState) error {
	rc := e.pki.restConfig(c.APIServer)
	ext, err := apiextclient.NewForConfig(rc)
	if err != nil {
		return err
	}
	crds, err := crd.All()
	if err != nil {
		return err
	}
	for _, want := range crds {
		cur, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, want, metav1.CreateOptions{})
		case err == nil:
			want.ResourceVersion = cur.ResourceVersion
			_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, want, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("install CRD %s in %s: %w", want.Name, c.Name, err)
		}
	}
	for _, want := range crds {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			cur, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // retried
			}
			for _, cond := range cur.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("CRD %s in %s not established: %w", want.Name, c.Name, err)
		}
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RingNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s in %s: %w", RingNamespace, c.Name, err)
	}
	return nil
}

// register writes the member clusters' kubeconfigs into the hub as
// multicluster-runtime kubeconfig Secrets (name = cluster name).
func (e *Env) register(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(e.pki.restConfig(e.state.Hub.APIServer))
	if err != nil {
		return err
	}
	for _, m := range e.state.MemberClusters {
		kc, err := os.ReadFile(e.state.KubeconfigPath(m.Name))
		if err != nil {
			return err
		}
		want := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: RingNamespace,
				Labels: map[string]string{KubeconfigSecretLabel: "true", "etcdfed.dev/local-environment": "true"}},
			Data: map[string][]byte{KubeconfigSecretKey: kc},
		}
		cur, err := cs.CoreV1().Secrets(RingNamespace).Get(ctx, m.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cs.CoreV1().Secrets(RingNamespace).Create(ctx, want, metav1.CreateOptions{})
		case err == nil:
			cur.Labels, cur.Data = want.Labels, want.Data
			_, err = cs.CoreV1().Secrets(RingNamespace).Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("register %s with the hub: %w", m.Name, err)
		}
	}
	return nil
}

// writeKubeconfigs writes every cluster's admin kubeconfig, and the member
// clusters' again under kubeconfigs/members/.
func (e *Env) writeKubeconfigs() error {
	if err := os.MkdirAll(e.state.MemberKubeconfigDir(), 0o755); err != nil {
		return err
	}
	for _, c := range e.state.Clusters() {
		data, err := e.pki.kubeconfig(c.Name, c.APIServer)
		if err != nil {
			return err
		}
		if err := os.WriteFile(e.state.KubeconfigPath(c.Name), data, 0o600); err != nil {
			return err
		}
		if c.Name != HubClusterName {
			if err := os.WriteFile(filepath.Join(e.state.MemberKubeconfigDir(), c.Name+".yaml"), data, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}
