// Package metricsserve is how the hub and the spoke serve /metrics: over
// TLS, each request authenticated with the caller's bearer token
// (TokenReview) against the binary's own apiserver, then authorized.
//
// The hub authorizes by an explicit list of readers (Readers: the
// ServiceAccounts, users and groups its --metrics-readers names): it
// needs to create TokenReviews and nothing else. It never asks the
// apiserver whether a caller may read /metrics (a SubjectAccessReview):
// that permission is cluster-wide and lets whoever holds the hub's
// credential ask what ANY user may do anywhere (issue 37). An empty list
// refuses every caller.
//
// The spoke authorizes with a SubjectAccessReview for GET /metrics, the
// kube-rbac-proxy pattern as controller-runtime's metrics filter carries
// it out: a scraper needs a token of an identity bound to the ClusterRole
// etcdfed-metrics-reader (config/rbac/spoke), the spoke to create
// TokenReviews and SubjectAccessReviews in its member cluster.
package metricsserve

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
	metricsfilters "sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ReaderClusterRole is the ClusterRole that may read the spoke's /metrics.
const ReaderClusterRole = "etcdfed-metrics-reader"

// Options are the spoke's metrics server's options: on bindAddress ("0"
// off), secure (TLS, authentication and authorization by a
// SubjectAccessReview; the default) or plain HTTP, with the certificate
// and key tls.crt and tls.key of certDir ("" generates a self-signed one
// at start).
func Options(bindAddress string, secure bool, certDir string) metricsserver.Options {
	o := metricsserver.Options{BindAddress: bindAddress}
	if !secure {
		return o
	}
	o.SecureServing = true
	o.FilterProvider = metricsfilters.WithAuthenticationAndAuthorization
	o.CertDir = certDir
	return o
}

// ReaderOptions are the hub's metrics server's options: as Options, but a
// caller is authorized only when readers names it (TokenReview alone, no
// SubjectAccessReview).
func ReaderOptions(bindAddress string, secure bool, certDir string, readers Readers) metricsserver.Options {
	o := Options(bindAddress, secure, certDir)
	if secure {
		o.FilterProvider = readers.Filter
	}
	return o
}

// Readers is the allow-list of /metrics callers.
type Readers struct {
	// Users are user names, a ServiceAccount's as
	// system:serviceaccount:NAMESPACE:NAME.
	Users []string
	// Groups are group names (system:serviceaccounts:NAMESPACE takes
	// every ServiceAccount of a namespace).
	Groups []string
}

// ErrReader says an entry of --metrics-readers is not one.
var ErrReader = errors.New("metricsserve: not a metrics reader")

// ParseReaders reads --metrics-readers entries: NAMESPACE/NAME (a
// ServiceAccount), user:NAME or group:NAME.
func ParseReaders(entries []string) (Readers, error) {
	var r Readers
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case strings.HasPrefix(e, "user:") && len(e) > len("user:"):
			r.Users = append(r.Users, strings.TrimPrefix(e, "user:"))
		case strings.HasPrefix(e, "group:") && len(e) > len("group:"):
			r.Groups = append(r.Groups, strings.TrimPrefix(e, "group:"))
		default:
			ns, name, ok := strings.Cut(e, "/")
			if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
				return Readers{}, fmt.Errorf("%w: %q: want NAMESPACE/NAME (a ServiceAccount), user:NAME or group:NAME", ErrReader, e)
			}
			r.Users = append(r.Users, "system:serviceaccount:"+ns+":"+name)
		}
	}
	return r, nil
}

// Allows reports whether u is a reader.
func (r Readers) Allows(u user.Info) bool {
	if u == nil {
		return false
	}
	if slices.Contains(r.Users, u.GetName()) {
		return true
	}
	return slices.ContainsFunc(u.GetGroups(), func(g string) bool { return slices.Contains(r.Groups, g) })
}

// Filter is a metricsserver.FilterProvider: the caller's bearer token
// checked with a TokenReview (cached for a minute), then the caller
// looked up in r. 401 without a valid token, 403 for a caller r does not
// name.
func (r Readers) Filter(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	tokenReviews, err := authenticationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("create TokenReview client: %w", err)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  tokenReviews,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("create authenticator: %w", err)
	}
	return func(log logr.Logger, handler http.Handler) (http.Handler, error) {
		if len(r.Users)+len(r.Groups) == 0 {
			log.Info("No metrics readers named (--metrics-readers): /metrics refuses every caller")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			res, ok, err := authn.AuthenticateRequest(req)
			switch {
			case err != nil:
				log.V(4).Info("Authentication of a metrics request failed", "error", err.Error())
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			case !ok:
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			case !r.Allows(res.User):
				log.V(4).Info("Refused a metrics request", "user", res.User.GetName())
				http.Error(w, fmt.Sprintf("%s is not a metrics reader (--metrics-readers)", res.User.GetName()), http.StatusForbidden)
				return
			}
			handler.ServeHTTP(w, req)
		}), nil
	}, nil
}
