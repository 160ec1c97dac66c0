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
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
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
	pl := planeLayout{
		dir:     e.state.clusterDir(c.Name),
		cgroup:  e.cgroupDir(c.Name, "infra"),
		ip:      p.APIServer(c.Index).Addr(),
		etcdURL: "http://" + p.APIEtcd(c.Index).String(),
		peerURL: "http://" + p.APIEtcdPeer(c.Index).String(),
	}
	if e.state.Real() {
		pl.ip = p.RealAPIServer(c.Index).Addr()
	}
	if err := os.MkdirAll(filepath.Join(pl.dir, "apiserver"), 0o755); err != nil {
		return nil, err
	}
	cp := &controlPlane{}
	var err error
	cp.etcd, err = startService("etcd-"+c.Name, func() proc.Spec { return e.storeSpec(c, pl) }, true, e.log)
	if err != nil {
		return nil, err
	}
	if pl.certFile, pl.keyFile, err = e.pki.servingCert(c.Name, pl.ip.AsSlice()); err != nil {
		cp.stop(0)
		return nil, fmt.Errorf("serving certificate of %s: %w", c.Name, err)
	}
	if pl.kubeletCert, pl.kubeletKey, err = e.pki.kubeletClientCert(); err != nil {
		cp.stop(0)
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	if e.state.Real() {
		pl.realArgs = e.realAPIServerArgs(c)
	}
	cp.apiserver, err = startService("apiserver-"+c.Name, func() proc.Spec { return e.apiserverSpec(c, pl) }, true, e.log)
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

// planeLayout is where one cluster's control plane lives: its directory,
// cgroup, addresses, and the apiserver's certificates and extra flags.
type planeLayout struct {
	dir, cgroup             string
	ip                      netip.Addr
	etcdURL, peerURL        string
	certFile, keyFile       string
	kubeletCert, kubeletKey string
	realArgs                []string
}

// storeSpec is the process of cluster c's apiserver store: a one-member
// etcd without fsync.
func (e *Env) storeSpec(c ClusterState, pl planeLayout) proc.Spec {
	dir, cg := pl.dir, pl.cgroup
	return proc.Spec{
		Name: "etcd-" + c.Name, Path: filepath.Join(e.bin, e.state.StoreBinary()),
		Args: []string{
			"--name=" + c.Name, "--data-dir=" + filepath.Join(dir, "etcd"),
			"--listen-client-urls=" + pl.etcdURL, "--advertise-client-urls=" + pl.etcdURL,
			"--listen-peer-urls=" + pl.peerURL, "--initial-advertise-peer-urls=" + pl.peerURL,
			"--initial-cluster=" + c.Name + "=" + pl.peerURL,
			"--unsafe-no-fsync", "--log-level=warn", "--quota-backend-bytes=2147483648",
		},
		Env: minimalEnv(), Dir: dir,
		LogPath: filepath.Join(e.state.logDir(), "etcd-"+c.Name+".log"),
		PIDFile: filepath.Join(e.state.pidDir(), "etcd-"+c.Name+".pid"),
		Cgroup:  cg,
	}
}

// apiserverSpec is the process of cluster c's kube-apiserver.
func (e *Env) apiserverSpec(c ClusterState, pl planeLayout) proc.Spec {
	dir, cg := pl.dir, pl.cgroup
	return proc.Spec{
		Name: "apiserver-" + c.Name, Path: filepath.Join(e.bin, "kube-apiserver"),
		Args: overrideFlags([]string{
			"--etcd-servers=" + pl.etcdURL,
			"--bind-address=" + pl.ip.String(),
			fmt.Sprintf("--secure-port=%d", addr.APIServerPort),
			"--cert-dir=" + filepath.Join(dir, "apiserver"),
			"--tls-cert-file=" + pl.certFile, "--tls-private-key-file=" + pl.keyFile,
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
			"--kubelet-client-certificate=" + pl.kubeletCert,
			"--kubelet-client-key=" + pl.kubeletKey,
			"--allow-privileged=true",
			// No controller manager runs: no token controller, so no
			// ServiceAccount admission (as envtest).
			"--disable-admission-plugins=ServiceAccount",
			"--profiling=false",
			"--v=0",
		}, pl.realArgs),
		Env: minimalEnv(), Dir: dir,
		LogPath: filepath.Join(e.state.logDir(), "apiserver-"+c.Name+".log"),
		PIDFile: filepath.Join(e.state.pidDir(), "apiserver-"+c.Name+".pid"),
		Cgroup:  cg,
	}
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

// register installs etcdfed into the clusters with the commands a user
// runs on real clusters: `etcdfed hub install --hub external` in the hub
// cluster, then `etcdfed cluster join --spoke external` for every member
// cluster (cli/install), the hub and the spokes being local processes
// here. Each member cluster is registered in the hub the way join does it:
// a kubeconfig Secret with a short-lived token of the hub's least-privilege
// ServiceAccount, which the hub renews. On a reused state directory it
// writes nothing that is already there.
func (e *Env) register(ctx context.Context) error {
	hub := e.pki.restConfig(e.state.Hub.APIServer)
	progress := func(s string) { e.log.Info(s) }
	if err := install.InstallHub(ctx, install.HubInstallOptions{Hub: hub, HubOptions: install.HubOptions{External: true}, Progress: progress}); err != nil {
		return fmt.Errorf("install the hub's side: %w", err)
	}
	errs := make([]error, len(e.state.MemberClusters))
	var wg sync.WaitGroup
	for i, m := range e.state.MemberClusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = install.Join(ctx, install.JoinOptions{
				MemberOptions: install.MemberOptions{Name: m.Name, External: true},
				Hub:           hub, Member: e.pki.restConfig(m.APIServer),
				Progress: progress,
			})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
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

// StopAPIServer kills a member cluster's apiserver and its etcd as a crash
// would. Pods, the node agent and the cluster's components keep running
// (and keep retrying the apiserver), as in a real control-plane outage.
func (e *Env) StopAPIServer(name string) error {
	if _, ok := e.state.Cluster(name); !ok || name == HubClusterName {
		return fmt.Errorf("localenv: no member cluster %q", name)
	}
	e.mu.Lock()
	cp := e.planes[name]
	delete(e.planes, name)
	e.mu.Unlock()
	if cp == nil {
		return fmt.Errorf("localenv: the apiserver of %s is not running", name)
	}
	cp.stop(0)
	return nil
}

// StartAPIServer starts a member cluster's apiserver stopped by
// StopAPIServer again, on the same address and data, and waits until it is
// ready.
func (e *Env) StartAPIServer(ctx context.Context, name string) error {
	c, ok := e.state.Cluster(name)
	if !ok || name == HubClusterName {
		return fmt.Errorf("localenv: no member cluster %q", name)
	}
	e.mu.Lock()
	running := e.planes[name] != nil
	e.mu.Unlock()
	if running {
		return fmt.Errorf("localenv: the apiserver of %s is running", name)
	}
	cp, err := e.startControlPlane(ctx, c)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.planes[name] = cp
	e.mu.Unlock()
	return nil
}
