package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/internal/scheme"
)

// hubFlags locate the hub cluster the way kubectl does: --kubeconfig,
// KUBECONFIG, ~/.kube/config; --context; -n/--namespace.
type hubFlags struct {
	kubeconfig, context, namespace string
	timeout                        time.Duration
}

func (h *hubFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&h.kubeconfig, "kubeconfig", "", "Kubeconfig of the hub cluster (default: KUBECONFIG, then ~/.kube/config).")
	fs.StringVar(&h.context, "context", "", "Kubeconfig context of the hub cluster.")
	fs.StringVarP(&h.namespace, "namespace", "n", "", "Namespace of the EtcdCluster (default: the context's namespace).")
	fs.DurationVar(&h.timeout, "request-timeout", 10*time.Second, "Timeout of each request to the hub cluster's apiserver; a dead or hung apiserver fails the command after it.")
}

// config returns the hub's REST config and the namespace to use.
func (h *hubFlags) config() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if h.kubeconfig != "" {
		rules.ExplicitPath = h.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: h.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("hub kubeconfig: %w", err)
	}
	if h.timeout > 0 {
		cfg.Timeout = h.timeout
	}
	ns := h.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	return cfg, ns, nil
}

func (h *hubFlags) client() (client.Client, string, error) {
	cfg, ns, err := h.config()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, "", fmt.Errorf("hub client (apiserver %s): %w", cfg.Host, err)
	}
	return c, ns, nil
}
