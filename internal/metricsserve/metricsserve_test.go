package metricsserve_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	hubrbac "github.com/etcdfed/etcdfed/config/rbac/hub"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/internal/metricsserve"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// TestMetricsNeedTokenAndRole, against a real apiserver: the hub, with
// nothing but the permissions of config/rbac/hub, serves /metrics over TLS
// only; a request without a token is refused (401), one with the token of
// a ServiceAccount not bound to etcdfed-metrics-reader too (403), and one
// bound to it is served. Before, /metrics was plain HTTP to anyone who
// reached the port.
func TestMetricsNeedTokenAndRole(t *testing.T) {
	cl := testenv.Shared(t, "metrics")
	ctx := context.Background()
	ns := testenv.NamespaceT(t, cl, "hub")
	objs, err := hubrbac.Objects(ns)
	if err != nil {
		t.Fatal(err)
	}
	reader := ""
	for _, o := range objs {
		if err := cl.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), o) })
		if cr, ok := o.(*rbacv1.ClusterRole); ok && strings.HasPrefix(cr.Name, metricsserve.ReaderClusterRole) {
			reader = cr.Name
		}
	}
	if reader == "" {
		t.Fatal("config/rbac/hub has no etcdfed-metrics-reader ClusterRole")
	}
	hub, err := cl.Env.AddUser(envtest.User{Name: "system:serviceaccount:" + ns + ":" + hubrbac.ServiceAccountName,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	mgr, err := manager.New(hub.Config(), manager.Options{Metrics: metricsserve.Options(addr, true, ""), HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = mgr.Start(mctx) }()

	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("prometheus"), token("stranger")
	if err := cl.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}}}); err != nil {
		t.Fatal(err)
	}
	get := func(scheme, tok string) (int, string, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed serving certificate
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/metrics", nil)
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
	deadline := time.Now().Add(time.Minute)
	for {
		code, body, err := get("https", scraper)
		if err == nil && code == http.StatusOK {
			if !strings.Contains(body, "# TYPE") {
				t.Errorf("served, but not metrics: %.200s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scraper bound to %s is not served: %d %v %.200s", reader, code, err, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, tc := range []struct {
		name, scheme, token string
		want                int
	}{
		{"no token", "https", "", http.StatusUnauthorized},
		{"a token not bound to the reader role", "https", stranger, http.StatusForbidden},
	} {
		code, _, err := get(tc.scheme, tc.token)
		if err != nil || code != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.name, code, err, tc.want)
		}
	}
	// A token the apiserver cannot parse fails its TokenReview (500 from
	// controller-runtime's filter): refused all the same.
	if code, _, err := get("https", "not-a-token"); err != nil || code == http.StatusOK {
		t.Errorf("a made-up token: %d %v, want a refusal", code, err)
	}
	if code, body, err := get("http", scraper); err == nil && code == http.StatusOK {
		t.Errorf("plain HTTP served the metrics: %.100s", body)
	} else {
		t.Logf("plain HTTP: %d %v", code, err)
	}
}

func ptr[T any](v T) *T { return &v }
