package metricsserve_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hubrbac "github.com/etcdfed/etcdfed/config/rbac/hub"
	spokerbac "github.com/etcdfed/etcdfed/config/rbac/spoke"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/internal/metricsserve"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// server starts a manager as user (a ServiceAccount of ns) serving
// /metrics with opts at a free port, and returns the address.
func server(t *testing.T, cl *testenv.Cluster, ns, sa string, opts func(addr string) metricsserver.Options) string {
	t.Helper()
	u, err := cl.Env.AddUser(envtest.User{Name: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	mgr, err := manager.New(u.Config(), manager.Options{Metrics: opts(addr), HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = mgr.Start(ctx) }()
	return addr
}

// create creates objs as the admin, removed at the end.
func create(t *testing.T, cl *testenv.Cluster, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cl.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), o) })
	}
}

// token creates ServiceAccount name in ns and returns a token of it.
func token(t *testing.T, cl *testenv.Cluster, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func get(addr, scheme, tok string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed serving certificate
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, scheme+"://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// served waits until tok is served the metrics at addr.
func served(t *testing.T, addr, tok, who string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body, err := get(addr, "https", tok)
		if err == nil && code == http.StatusOK {
			if !strings.Contains(body, "# TYPE") {
				t.Errorf("served, but not metrics: %.200s", body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not served: %d %v %.200s", who, code, err, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func refused(t *testing.T, addr, what, tok string, want int) {
	t.Helper()
	if code, body, err := get(addr, "https", tok); err != nil || code != want {
		t.Errorf("%s: %d %v %.100s, want %d", what, code, err, body, want)
	}
}

// TestHubMetricsNeedTokenAndReader, against a real apiserver: the hub,
// with nothing but the permissions of config/rbac/hub, serves /metrics
// over TLS only, to the callers --metrics-readers names (a ServiceAccount,
// a group); a request without a token is refused (401), one of a
// ServiceAccount it does not name too (403), even when the cluster's RBAC
// lets that one GET /metrics. Issue 37: the hub authorized with a
// SubjectAccessReview, whose cluster-wide create let whoever held its
// credential ask what anyone may do; config/rbac/hub no longer grants it
// (TestHubPermissions fails if it comes back), so a filter that still
// asked would serve no one here.
func TestHubMetricsNeedTokenAndReader(t *testing.T) {
	cl := testenv.Shared(t, "metrics")
	ns := testenv.NamespaceT(t, cl, "hub")
	objs, err := hubrbac.Objects(ns)
	if err != nil {
		t.Fatal(err)
	}
	create(t, cl, objs...)
	for _, o := range objs {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, "subjectaccessreviews") || slices.Contains(r.Resources, "*")
		}) {
			t.Errorf("config/rbac/hub's ClusterRole %s grants SubjectAccessReviews", cr.Name)
		}
	}
	other := testenv.NamespaceT(t, cl, "scrapers")
	readers, err := metricsserve.ParseReaders([]string{ns + "/prometheus", "group:system:serviceaccounts:" + other})
	if err != nil {
		t.Fatal(err)
	}
	addr := server(t, cl, ns, hubrbac.ServiceAccountName, func(addr string) metricsserver.Options {
		return metricsserve.ReaderOptions(addr, true, "", readers)
	})
	scraper, grouped, stranger := token(t, cl, ns, "prometheus"), token(t, cl, other, "agent"), token(t, cl, ns, "stranger")
	// The cluster's RBAC does not make a reader: the stranger may GET
	// /metrics by it, and is refused all the same.
	create(t, cl, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-get-" + ns},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "stranger-" + ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-get-" + ns},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "stranger", Namespace: ns}}})
	served(t, addr, scraper, "the ServiceAccount --metrics-readers names")
	served(t, addr, grouped, "a ServiceAccount of the group --metrics-readers names")
	refused(t, addr, "no token", "", http.StatusUnauthorized)
	refused(t, addr, "a ServiceAccount --metrics-readers does not name", stranger, http.StatusForbidden)
	refused(t, addr, "a made-up token", "not-a-token", http.StatusUnauthorized)
	if code, body, err := get(addr, "http", scraper); err == nil && code == http.StatusOK {
		t.Errorf("plain HTTP served the metrics: %.100s", body)
	}

	// No reader named: every caller is refused.
	none := server(t, cl, ns, hubrbac.ServiceAccountName, func(addr string) metricsserver.Options {
		return metricsserve.ReaderOptions(addr, true, "", metricsserve.Readers{})
	})
	deadline := time.Now().Add(time.Minute)
	for {
		code, _, err := get(none, "https", scraper)
		if err == nil {
			if code != http.StatusForbidden {
				t.Errorf("no readers named: the scraper got %d, want 403", code)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no readers named: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSpokeMetricsNeedTokenAndRole: the spoke, with the permissions of
// config/rbac/spoke, authorizes by a SubjectAccessReview in its member
// cluster: a token bound to etcdfed-metrics-reader is served, one not
// bound is refused (403), none 401.
func TestSpokeMetricsNeedTokenAndRole(t *testing.T) {
	cl := testenv.Shared(t, "metrics")
	ns := testenv.NamespaceT(t, cl, "spoke")
	objs, err := spokerbac.Objects(ns)
	if err != nil {
		t.Fatal(err)
	}
	create(t, cl, objs...)
	reader := ""
	for _, o := range objs {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && strings.HasPrefix(cr.Name, metricsserve.ReaderClusterRole) {
			reader = cr.Name
		}
	}
	if reader == "" {
		t.Fatal("config/rbac/spoke has no etcdfed-metrics-reader ClusterRole")
	}
	addr := server(t, cl, ns, "etcdfed-spoke", func(addr string) metricsserver.Options { return metricsserve.Options(addr, true, "") })
	scraper, stranger := token(t, cl, ns, "prometheus"), token(t, cl, ns, "stranger")
	create(t, cl, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}}})
	served(t, addr, scraper, "the scraper bound to "+reader)
	refused(t, addr, "no token", "", http.StatusUnauthorized)
	refused(t, addr, "a token not bound to the reader role", stranger, http.StatusForbidden)
}

func TestParseReaders(t *testing.T) {
	r, err := metricsserve.ParseReaders([]string{"monitoring/prometheus", "user:alice", "group:ops", " "})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Users, []string{"system:serviceaccount:monitoring:prometheus", "alice"}) || !slices.Equal(r.Groups, []string{"ops"}) {
		t.Errorf("readers %+v", r)
	}
	for _, bad := range []string{"prometheus", "Monitoring/prometheus", "user:", "group:", "a/b/c"} {
		if _, err := metricsserve.ParseReaders([]string{bad}); !errors.Is(err, metricsserve.ErrReader) {
			t.Errorf("%q: %v, want ErrReader", bad, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
