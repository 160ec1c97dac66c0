// Package testenv starts real kube-apiservers (each with its own etcd) for
// tests and for the local environment, with the etcdfed CRDs installed.
// Binaries come from bin/ (built by `make tools`), never from the network.
// Every process it starts dies with the test binary, even one that panics
// or is killed by -timeout, and is recorded for hack/leftovers (procs.go).
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/etcdfed/etcdfed/config/crd"
	"github.com/etcdfed/etcdfed/dev/testenv/testproc"
	"github.com/etcdfed/etcdfed/internal/repo"
	"github.com/etcdfed/etcdfed/internal/scheme"
)

// ErrNoBinaries says bin/ lacks kube-apiserver or etcd.
var ErrNoBinaries = repo.ErrNoBinaries

// Scheme returns a scheme with the Kubernetes and etcdfed types.
func Scheme() *runtime.Scheme { return scheme.New() }

// RepoRoot walks up from the working directory to the directory holding the
// etcdfed go.mod.
func RepoRoot() (string, error) { return repo.Root() }

// BinDir returns the directory with kube-apiserver and etcd: ETCDFED_BIN_DIR
// when set, else <repo>/bin.
func BinDir() (string, error) { return repo.BinDir() }

// Cluster is one running kube-apiserver with its etcd.
type Cluster struct {
	// Name identifies the cluster in logs and kubeconfigs.
	Name string
	// Env is the envtest environment behind it.
	Env *envtest.Environment
	// Config is an admin rest config.
	Config *rest.Config
	// Client is an uncached admin client with Scheme().
	Client client.Client

	dir string // etcd data and apiserver certificates
}

// Options tunes Start.
type Options struct {
	// StartTimeout bounds the start of each apiserver. Default 2m: on two busy
	// cores four apiservers starting at once take a while.
	StartTimeout time.Duration
	// WithoutCRDs skips installing the etcdfed CRDs.
	WithoutCRDs bool
}

// Start starts one apiserver per name, in parallel. On error every started
// apiserver is stopped again.
func Start(ctx context.Context, opts Options, names ...string) ([]*Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	crds, err := crd.All()
	if err != nil {
		return nil, err
	}
	wrap, err := wrapperDir(bin)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	own, err := testproc.OwnDir()
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	clusters := make([]*Cluster, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = startOne(name, opts, bin, wrap, own, crds)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range clusters {
			if c != nil {
				_ = c.Stop()
			}
		}
		return nil, err
	}
	return clusters, nil
}

// startOne starts the apiserver name, its etcd's data and its
// certificates in a new directory below own, through the wrappers in wrap.
func startOne(name string, opts Options, bin, wrap, own string, crds []*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	// Data and certificates live in this binary's run directory, so that
	// what a killed test binary leaves is found and removed by the next
	// `make test`.
	dir, err := os.MkdirTemp(own, "cluster-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("start apiserver %s: %w", name, err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: opts.StartTimeout,
		ControlPlaneStopTimeout:  time.Minute,
		ErrorIfCRDPathMissing:    true,
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path, api.CertDir = filepath.Join(wrap, "kube-apiserver"), filepath.Join(dir, "apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(wrap, "etcd"), DataDir: filepath.Join(dir, "etcd")}
	for _, d := range []string{api.CertDir, env.ControlPlane.Etcd.DataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("start apiserver %s: %w", name, err)
		}
	}
	if !opts.WithoutCRDs {
		for _, c := range crds {
			env.CRDs = append(env.CRDs, c.DeepCopy())
		}
	}
	var cfg *rest.Config
	// envtest forks etcd and kube-apiserver inside Start: fork
	// from a thread that never exits (see package testproc).
	testproc.OnFixedThread(func() { cfg, err = env.Start() })
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start apiserver %s: %w", name, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c := &Cluster{Name: name, Env: env, Config: cfg, dir: dir}
	c.Client, err = client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("client for %s: %w", name, err)
	}
	return c, nil
}

// Stop stops the apiserver and its etcd and removes their data.
func (c *Cluster) Stop() error {
	if err := c.Env.Stop(); err != nil {
		return fmt.Errorf("stop apiserver %s: %w", c.Name, err)
	}
	if own, err := testproc.OwnDir(); err == nil {
		_ = testproc.Prune(own)
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove data of apiserver %s: %w", c.Name, err)
	}
	return nil
}

// Kubeconfig returns an admin kubeconfig for the cluster, its context named
// after the cluster.
func (c *Cluster) Kubeconfig() ([]byte, error) {
	user, err := c.Env.AddUser(envtest.User{Name: "etcdfed-admin-" + c.Name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add admin user to %s: %w", c.Name, err)
	}
	return user.KubeConfig()
}

// CreateNamespace creates a namespace with a generated name from prefix.
func (c *Cluster) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{}
	ns.GenerateName = prefix + "-"
	if err := c.Client.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("create namespace in %s: %w", c.Name, err)
	}
	return ns.Name, nil
}
