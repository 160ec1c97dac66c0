package registry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/faultproxy"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// sourceFunc lets the test change the registrations while the provider runs.
type sourceFunc func() []Registration

func (f sourceFunc) Registrations(context.Context) ([]Registration, error) { return f(), nil }

// TestProviderThroughOutages runs the provider in a real multicluster
// manager against two real apiservers, one of them behind a proxy that
// black-holes it: the answering cluster is engaged regardless, the other
// is reported with its reason and engaged once it answers, an engaged
// cluster that stops answering stays engaged with its cache readable at
// once, events flow again when it is back, and a deregistered cluster is
// gone.
func TestProviderThroughOutages(t *testing.T) {
	cls := testenv.StartT(t, "hub", "a", "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := map[string]string{}
	for _, c := range cls[1:] {
		ns[c.Name] = testenv.NamespaceT(t, c, "ring")
	}
	kubeconfig := func(c *testenv.Cluster, server string) []byte {
		t.Helper()
		data, err := c.Kubeconfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.Load(data)
		if err != nil {
			t.Fatal(err)
		}
		if server != "" {
			for _, cl := range cfg.Clusters {
				cl.Server = server
			}
		}
		out, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	u, err := url.Parse(cls[2].Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetMode(faultproxy.BlackHole)

	var mu sync.Mutex
	regs := []Registration{
		{MemberCluster: MemberCluster{Name: "a"}, Kubeconfig: kubeconfig(cls[1], "")},
		{MemberCluster: MemberCluster{Name: "b"}, Kubeconfig: kubeconfig(cls[2], "https://"+proxy.Addr())},
	}
	p := &Provider{
		Source: sourceFunc(func() []Registration { mu.Lock(); defer mu.Unlock(); return append([]Registration(nil), regs...) }),
		ClusterOptions: []cluster.Option{func(o *cluster.Options) {
			o.Scheme = testenv.Scheme()
			o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns["a"]: {}, ns["b"]: {}}, ReaderFailOnMissingInformer: true}
		}},
		PreflightTimeout: time.Second, EngageTimeout: 5 * time.Second, RetryMax: time.Second,
		HealthInterval: 300 * time.Millisecond, RefreshAfter: 2 * time.Second,
		Log: testr.New(t),
	}
	mgr, err := mcmanager.New(cls[0].Config, p, manager.Options{Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 100)
	err = mcbuilder.ControllerManagedBy(mgr).Named("probe").
		For(&etcdfedv1.EtcdSpoke{}, mcbuilder.WithEngageWithLocalCluster(false)).
		Complete(mcreconcile.Func(func(_ context.Context, req mcreconcile.Request) (ctrl.Result, error) {
			seen <- req.ClusterName.String() + "/" + req.Name
			return ctrl.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	state := func(name string) *ClusterState {
		list, err := p.List(ctx)
		if err != nil {
			return nil
		}
		for _, mc := range list {
			if mc.Name == name {
				return mc.State
			}
		}
		return nil
	}
	waitFor := func(what string, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > time.Minute {
				t.Fatalf("%s: not within a minute", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start)
	}

	waitFor("a engaged", func() bool { s := state("a"); return s != nil && s.Engaged })
	waitFor("b reported with a reason", func() bool { s := state("b"); return s != nil && s.Attempts > 0 })
	if s := state("b"); s.Engaged || !strings.Contains(s.Problem, proxy.Addr()) {
		t.Errorf("black-holed b: engaged %v, problem %q; want not engaged, naming %s", s.Engaged, s.Problem, proxy.Addr())
	}
	if _, err := p.Get(ctx, "b"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Errorf("Get(b) while not engaged: %v, want ErrClusterNotFound", err)
	}

	proxy.SetMode(faultproxy.Forward)
	d := waitFor("b engaged once it answers", func() bool { s := state("b"); return s != nil && s.Engaged })
	t.Logf("b engaged %.1fs after it answered", d.Seconds())

	// Engaged, then hung: b stays engaged and its cache answers at once.
	proxy.SetMode(faultproxy.BlackHole)
	cl, err := p.Get(ctx, "b")
	if err != nil {
		t.Fatalf("Get(b) after it hung: %v", err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	var spokes etcdfedv1.EtcdSpokeList
	if err := cl.GetClient().List(rctx, &spokes, client.InNamespace(ns["b"])); err != nil {
		t.Errorf("cached list of a hung cluster: %v", err)
	}
	rcancel()
	// A kind no controller watches fails at once instead of waiting for an
	// informer that cannot sync.
	rctx, rcancel = context.WithTimeout(ctx, 5*time.Second)
	var leases etcdfedv1.EtcdDNSZoneList
	if err := cl.GetClient().List(rctx, &leases, client.InNamespace(ns["b"])); err == nil || rctx.Err() != nil {
		t.Errorf("read of an unwatched kind: err %v, ctx %v; want an immediate error", err, rctx.Err())
	}
	rcancel()

	// Back after longer than RefreshAfter: reconnected with fresh lists
	// (a new cluster object), not left to the watches' retry backoff. The
	// provider counts the outage from its first failed probe, which
	// returns a probe timeout (PreflightTimeout) after the hang began, so
	// the hang lasts RefreshAfter plus that plus a margin: a plain 3 s
	// left 0 to 0.3 s and failed under load ("not within a minute").
	time.Sleep(p.RefreshAfter + p.PreflightTimeout + 2*time.Second)
	proxy.SetMode(faultproxy.Forward)
	d = waitFor("b reconnected after its apiserver came back", func() bool { now, err := p.Get(ctx, "b"); return err == nil && now != cl })
	t.Logf("b reconnected %.1fs after it answered again", d.Seconds())
	spoke := &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns["b"], Name: "after-outage"}}
	if err := cls[2].Client.Create(ctx, spoke); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for got := ""; got != "b/after-outage"; {
		select {
		case got = <-seen:
		case <-time.After(time.Minute):
			t.Fatal("no event from b after it answered again")
		}
	}
	t.Logf("event from b %.1fs after it answered again", time.Since(start).Seconds())

	mu.Lock()
	regs = regs[1:]
	mu.Unlock()
	waitFor("a deregistered", func() bool { _, err := p.Get(ctx, "a"); return err != nil && state("a") == nil })
}

func TestFilesRegistrations(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "one.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	regs, err := Files{"one": path, "missing": filepath.Join(dir, "nope")}.Registrations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range regs {
		got[r.Name] = len(r.Kubeconfig)
	}
	if len(got) != 2 || got["one"] == 0 || got["missing"] != 0 {
		t.Errorf("registrations %v: want one with its kubeconfig and missing without", got)
	}
}

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		attempts int
		want     time.Duration
	}{{1, 250 * time.Millisecond}, {2, 500 * time.Millisecond}, {4, 2 * time.Second}, {5, 4 * time.Second}, {6, 5 * time.Second}, {60, 5 * time.Second}} {
		if got := backoff(c.attempts, 5*time.Second); got != c.want {
			t.Errorf("backoff(%d) = %s, want %s", c.attempts, got, c.want)
		}
	}
}

func TestSyncWait(t *testing.T) {
	p := &Provider{EngageTimeout: 20 * time.Second}
	for _, c := range []struct {
		slowSyncs int
		want      time.Duration
	}{{0, 20 * time.Second}, {1, 40 * time.Second}, {3, 160 * time.Second}, {4, maxSyncWait}, {40, maxSyncWait}} {
		if got := p.syncWait(c.slowSyncs); got != c.want {
			t.Errorf("syncWait(%d) = %s, want %s", c.slowSyncs, got, c.want)
		}
	}
	// An EngageTimeout above the cap is kept, not shortened.
	if got := (&Provider{EngageTimeout: 10 * time.Minute}).syncWait(2); got != 10*time.Minute {
		t.Errorf("syncWait with EngageTimeout 10m = %s, want 10m", got)
	}
}

// TestProviderUsesARenewedTokenWithoutReconnecting: a registration whose
// token changes (the hub renewed it) keeps its engaged cluster, cache and
// client, and the client's next request carries the new token: with the
// old token revoked, an uncached read still succeeds; handed the revoked
// token again, it fails.
func TestProviderUsesARenewedTokenWithoutReconnecting(t *testing.T) {
	cls := testenv.StartT(t, "hub", "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := cls[1]
	ns := testenv.NamespaceT(t, a, "ring")
	cs := kubernetes.NewForConfigOrDie(a.Config)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "hub"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "hub"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{etcdfedv1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "hub"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "hub"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "hub", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each token bound to a Secret of its own: deleting the Secret
	// revokes that token alone.
	token := func(bind string) string {
		t.Helper()
		sec, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bind}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "hub", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: bind, UID: sec.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	oldToken, newToken := token("bind-old"), token("bind-new")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["a"] = &clientcmdapi.Cluster{Server: a.Config.Host, CertificateAuthorityData: a.Config.CAData}
	kc.AuthInfos["hub"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["a"] = &clientcmdapi.Context{Cluster: "a", AuthInfo: "hub"}
	kc.CurrentContext = "a"
	kubeconfig, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reg := Registration{MemberCluster: MemberCluster{Name: "a"}, Kubeconfig: kubeconfig, Token: []byte(oldToken)}
	p := &Provider{
		Source: sourceFunc(func() []Registration { mu.Lock(); defer mu.Unlock(); return []Registration{reg} }),
		ClusterOptions: []cluster.Option{func(o *cluster.Options) {
			o.Scheme = testenv.Scheme()
			o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, ReaderFailOnMissingInformer: true}
		}},
		Interval: 100 * time.Millisecond, PreflightTimeout: time.Second, EngageTimeout: 10 * time.Second, RetryMax: time.Second,
		Log: testr.New(t),
	}
	startIdleController(ctx, t, cls[0].Config, p, "token-probe")
	var engaged cluster.Cluster
	waitFor(t, 30*time.Second, "cluster a engaged with the first token", func() bool {
		engaged, err = p.Get(ctx, "a")
		return err == nil
	})
	list := func() error {
		return engaged.GetAPIReader().List(ctx, &etcdfedv1.EtcdSpokeList{}, client.InNamespace(ns))
	}
	if err := list(); err != nil {
		t.Fatalf("read with the first token: %v", err)
	}

	// Renewed: the new token in the registration, the old one revoked.
	mu.Lock()
	reg.Token = []byte(newToken)
	mu.Unlock()
	if err := cs.CoreV1().Secrets(ns).Delete(ctx, "bind-old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the old token refused by the apiserver", func() bool {
		r, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: oldToken}}, metav1.CreateOptions{})
		return err == nil && !r.Status.Authenticated
	})
	waitFor(t, 10*time.Second, "a read with the renewed token", func() bool { return list() == nil })
	if now, err := p.Get(ctx, "a"); err != nil || now != engaged {
		t.Errorf("the cluster was replaced on a token renewal (%v): a renewal must not reconnect", err)
	}
	// The revoked token handed back: the same client now fails, so it
	// really sends the registration's current token.
	mu.Lock()
	reg.Token = []byte(oldToken)
	mu.Unlock()
	waitFor(t, 10*time.Second, "a read with the revoked token refused", func() bool {
		err := list()
		return err != nil && apierrors.IsUnauthorized(err)
	})
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestProviderWaitsLongerForSlowCaches: a member cluster whose apiserver
// answers discovery at once but every request for the watched kind only
// after listDelay (here a delay in the hub's transport to a real
// apiserver; in a fleet, an apiserver or a hub starved of CPU) outlasts
// EngageTimeout: each attempt abandoned so gives the next one twice as
// long, and the cluster is engaged once an attempt outlasts the delay. A
// constant timeout would relist from the start forever. The engaged
// cluster's client has no client-side rate limit.
func TestProviderWaitsLongerForSlowCaches(t *testing.T) {
	const listDelay = 3 * time.Second
	var delayed atomic.Int32
	ctx, hub, _, p := slowedClusterProvider(t, "slow", delaySpokeRequests(listDelay, func() bool { return true }, &delayed, nil))
	p.Interval, p.PreflightTimeout, p.EngageTimeout, p.RetryMax = 100*time.Millisecond, 5*time.Second, listDelay/3, 100*time.Millisecond
	startIdleController(ctx, t, hub.Config, p, "slow-probe")
	var problems []string
	var engaged cluster.Cluster
	waitFor(t, 2*time.Minute, "the slow cluster engaged", func() bool {
		if list, err := p.List(ctx); err == nil && len(list) == 1 && list[0].State.Problem != "" {
			if n := len(problems); n == 0 || problems[n-1] != list[0].State.Problem {
				problems = append(problems, list[0].State.Problem)
			}
		}
		var err error
		engaged, err = p.Get(ctx, "slow")
		return err == nil
	})
	t.Logf("engaged after %d requests for the slow kind; problems on the way: %q", delayed.Load(), problems)
	var timedOut []string
	for _, pr := range problems {
		if strings.Contains(pr, "caches not synced within") {
			timedOut = append(timedOut, pr)
		}
	}
	if len(timedOut) == 0 {
		t.Errorf("no attempt reported its caches not synced in time before the cluster was engaged (problems %q): the test did not slow the sync past EngageTimeout", problems)
	}
	if len(timedOut) > 0 && !strings.Contains(timedOut[0], "within "+p.EngageTimeout.String()) {
		t.Errorf("first timed-out attempt %q: want it to have waited EngageTimeout (%s)", timedOut[0], p.EngageTimeout)
	}
	if q := engaged.GetConfig().QPS; q >= 0 {
		t.Errorf("member cluster client QPS %v: want no client-side limit (negative), as controller-runtime sets for the hub", q)
	}
}

// oneClusterProvider is a provider of one member cluster, name, whose
// cache holds ns.
func oneClusterProvider(t *testing.T, name string, kubeconfig []byte, ns string) *Provider {
	return &Provider{
		Source: sourceFunc(func() []Registration {
			return []Registration{{MemberCluster: MemberCluster{Name: name}, Kubeconfig: kubeconfig}}
		}),
		ClusterOptions: []cluster.Option{func(o *cluster.Options) {
			o.Scheme = testenv.Scheme()
			o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, ReaderFailOnMissingInformer: true}
		}},
		Log: testr.New(t),
	}
}

// delaySpokeRequests is a REST option that holds every request for
// EtcdSpokes (lists and watches alike: client-go lists by a watch that
// sends the initial events) for delay while slow says so, counting them
// in n, and fails every /version request (the provider's health probe)
// while failProbes (nil: never) says so.
func delaySpokeRequests(delay time.Duration, slow func() bool, n *atomic.Int32, failProbes func() bool) func(*rest.Config) error {
	return func(c *rest.Config) error {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Path == "/version" && failProbes != nil && failProbes() {
					return nil, errors.New("probe failed by the test")
				}
				if strings.HasSuffix(r.URL.Path, "/etcdspokes") && slow() {
					n.Add(1)
					select {
					case <-time.After(delay):
					case <-r.Context().Done():
						return nil, r.Context().Err()
					}
				}
				return rt.RoundTrip(r)
			})
		})
		return nil
	}
}

// startIdleController runs a multicluster manager over p with one
// controller that watches EtcdSpokes in the member clusters and does
// nothing: what makes p engage them.
func startIdleController(ctx context.Context, t *testing.T, hub *rest.Config, p *Provider, name string) {
	t.Helper()
	startSeeingController(ctx, t, hub, p, name)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestProviderKeepsItsConnectionWhileAReconnectCannotSync: an engaged
// member cluster whose health probe fails for longer than RefreshAfter
// and then answers is reconnected; when the new connection's lists do not
// come within EngageTimeout (a hub or apiserver starved of CPU, as a
// fleet's hub was), the engaged connection stays: the cluster never stops
// being engaged, the same cluster object serves, and its watch still
// brings events. Before, a failed reconnect dropped the cluster and the
// rings counted it as lost until an attempt succeeded. The reconnect is
// retried (after a backoff, each slow one given twice as long): once lists
// come in time again, it replaces the connection, with no new outage.
func TestProviderKeepsItsConnectionWhileAReconnectCannotSync(t *testing.T) {
	const listDelay = 6 * time.Second
	var probesFail, listsSlow atomic.Bool
	var slowed atomic.Int32
	ctx, hub, ns, p := slowedClusterProvider(t, "m", delaySpokeRequests(listDelay, listsSlow.Load, &slowed, probesFail.Load))
	p.Kinds = []client.Object{&etcdfedv1.EtcdSpoke{}}
	p.Interval, p.PreflightTimeout, p.EngageTimeout, p.RetryMax = 100*time.Millisecond, 2*time.Second, listDelay/3, 100*time.Millisecond
	p.HealthInterval, p.RefreshAfter = 200*time.Millisecond, time.Second
	seen := startSeeingController(ctx, t, hub.Config, p, "keep-probe")
	var old cluster.Cluster
	waitFor(t, time.Minute, "the cluster engaged", func() bool { var err error; old, err = p.Get(ctx, "m"); return err == nil })
	failures := func() float64 { return testutil.ToFloat64(metricEngageFailures.WithLabelValues("m")) }
	before := failures()

	// Probes fail past RefreshAfter, then answer while lists are slow: the
	// reconnect cannot sync in time.
	listsSlow.Store(true)
	probesFail.Store(true)
	time.Sleep(p.RefreshAfter + time.Second)
	probesFail.Store(false)
	deadline := time.Now().Add(time.Minute)
	for failures() == before {
		if time.Now().After(deadline) {
			t.Fatalf("no failed reconnect within a minute (%d slowed lists)", slowed.Load())
		}
		if now, err := p.Get(ctx, "m"); err != nil || now != old {
			t.Fatalf("while a reconnect could not sync: Get(m) = %v, %v; want the engaged cluster kept", now, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if slowed.Load() == 0 {
		t.Fatal("the reconnect failed without a slowed list: the test did not exercise a sync timeout")
	}
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 || !list[0].State.Engaged {
		t.Fatalf("after the failed reconnect: %+v, %v; want m engaged", list, err)
	}
	if now, err := p.Get(ctx, "m"); err != nil || now != old {
		t.Fatalf("after the failed reconnect: Get(m) = %v, %v; want the engaged cluster kept", now, err)
	}
	// The kept connection's watch still brings events.
	if err := hub.Client.Create(ctx, &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, seen, "m/kept")

	// Lists in time again: the failed reconnect is tried again by itself
	// (the probes answer throughout; before, nothing retried it and the
	// kept connection stayed, whatever its watches did) and replaces the
	// connection.
	listsSlow.Store(false)
	waitFor(t, time.Minute, "the reconnect retried once lists come in time", func() bool { now, err := p.Get(ctx, "m"); return err == nil && now != old })
	if err := hub.Client.Create(ctx, &etcdfedv1.EtcdSpoke{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "renewed"}}); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, seen, "m/renewed")
}

// slowedClusterProvider starts a real apiserver and a namespace in it, and
// returns a context ended with t, the apiserver, the namespace and a
// provider of one member cluster, name, at that apiserver whose requests
// pass through slow (delaySpokeRequests).
func slowedClusterProvider(t *testing.T, name string, slow func(*rest.Config) error) (context.Context, *testenv.Cluster, string, *Provider) {
	t.Helper()
	cls := testenv.StartT(t, "hub")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := testenv.NamespaceT(t, cls[0], "ring")
	kubeconfig, err := cls[0].Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	p := oneClusterProvider(t, name, kubeconfig, ns)
	p.RESTOptions = []func(*rest.Config) error{slow}
	return ctx, cls[0], ns, p
}

// startSeeingController runs a multicluster manager over p with one
// controller that watches EtcdSpokes in the member clusters (what makes p
// engage them) and sends "cluster/name" of every request it gets, while
// the channel has room.
func startSeeingController(ctx context.Context, t *testing.T, hub *rest.Config, p *Provider, name string) <-chan string {
	t.Helper()
	seen := make(chan string, 1000)
	mgr, err := mcmanager.New(hub, p, manager.Options{Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	err = mcbuilder.ControllerManagedBy(mgr).Named(name).
		For(&etcdfedv1.EtcdSpoke{}, mcbuilder.WithEngageWithLocalCluster(false)).
		Complete(mcreconcile.Func(func(_ context.Context, req mcreconcile.Request) (ctrl.Result, error) {
			select {
			case seen <- req.ClusterName.String() + "/" + req.Name:
			default:
			}
			return ctrl.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	return seen
}

// expectEvent waits up to a minute for want among the requests seen.
func expectEvent(t *testing.T, seen <-chan string, want string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case got := <-seen:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("no request for %s within a minute", want)
		}
	}
}
