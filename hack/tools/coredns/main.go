// Command coredns is CoreDNS (github.com/coredns/coredns, pinned in
// go.mod) with only the plugins a Kubernetes cluster's DNS uses: the
// default Corefile of kubeadm and kind (errors, health, ready, kubernetes,
// prometheus, forward, cache, loop, reload, loadbalance) plus log and
// hosts. The full build links every cloud provider's SDK and takes minutes
// longer to build for nothing the local environment asks of it.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	// The plugins' order in a server block, as in CoreDNS's plugin.cfg.
	dnsserver.Directives = []string{
		"reload", "ready", "health", "prometheus", "errors", "log",
		"loadbalance", "cache", "hosts", "kubernetes", "loop", "forward",
	}
	coremain.Run()
}
