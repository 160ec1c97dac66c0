package registry

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// ErrUnsafeKubeconfig wraps every refusal of CheckKubeconfig.
var ErrUnsafeKubeconfig = errors.New("kubeconfig refused")

// CheckKubeconfig refuses a member cluster's kubeconfig that makes the hub
// do more than call the member cluster's apiserver over verified TLS with
// the credentials it holds (rule 14): whoever can write a kubeconfig
// Secret in the hub's namespace must not be able to run a program in the
// hub (an exec or auth-provider plugin), read the hub's files (a
// certificate, key or token given by path), or make the hub talk to an
// apiserver it does not verify (insecure-skip-tls-verify, plain http).
// Only the context the hub uses (current-context) is checked, and every
// problem of it is named.
func CheckKubeconfig(data []byte) error {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	ctxName := cfg.CurrentContext
	kctx := cfg.Contexts[ctxName]
	if kctx == nil {
		return fmt.Errorf("%w: no current context", ErrUnsafeKubeconfig)
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if c := cfg.Clusters[kctx.Cluster]; c != nil {
		if c.InsecureSkipTLSVerify {
			bad("cluster %q sets insecure-skip-tls-verify", kctx.Cluster)
		}
		if u, err := url.Parse(c.Server); err != nil || u.Scheme != "https" {
			bad("cluster %q server %q is not https", kctx.Cluster, c.Server)
		}
		if c.CertificateAuthority != "" {
			bad("cluster %q reads certificate-authority from the file %s (give certificate-authority-data)", kctx.Cluster, c.CertificateAuthority)
		}
	}
	if u := cfg.AuthInfos[kctx.AuthInfo]; u != nil {
		if u.Exec != nil {
			bad("user %q runs the exec plugin %q", kctx.AuthInfo, u.Exec.Command)
		}
		if u.AuthProvider != nil {
			bad("user %q uses the auth-provider plugin %q", kctx.AuthInfo, u.AuthProvider.Name)
		}
		for what, path := range map[string]string{"client-certificate": u.ClientCertificate, "client-key": u.ClientKey, "tokenFile": u.TokenFile} {
			if path != "" {
				bad("user %q reads %s from the file %s", kctx.AuthInfo, what, path)
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	// map order: sorted for a stable message (the provider logs on change).
	slices.Sort(problems)
	return fmt.Errorf("%w: %s (the hub's operator allows such kubeconfigs with --allow-unsafe-kubeconfigs)", ErrUnsafeKubeconfig, strings.Join(problems, "; "))
}
