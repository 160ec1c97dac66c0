// Package metricsserve is how the hub and the spoke serve /metrics: over
// TLS, each request authenticated with the caller's bearer token
// (TokenReview) and authorized for GET /metrics (SubjectAccessReview)
// against the binary's own apiserver, the kube-rbac-proxy pattern as
// controller-runtime's metrics filter carries it out. A scraper needs a
// token of an identity bound to the ClusterRole etcdfed-metrics-reader
// (config/rbac), the binary needs to create TokenReviews and
// SubjectAccessReviews (its ClusterRole).
package metricsserve

import (
	metricsfilters "sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ReaderClusterRole is the ClusterRole that may read /metrics.
const ReaderClusterRole = "etcdfed-metrics-reader"

// Options are the metrics server's options: on bindAddress ("0" off),
// secure (TLS, authentication and authorization; the default) or plain
// HTTP, with the certificate and key tls.crt and tls.key of certDir (""
// generates a self-signed one at start).
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
