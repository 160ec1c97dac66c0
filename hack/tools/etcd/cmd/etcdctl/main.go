// Command etcdctl is upstream etcdctl at the pinned version, as its own main
// package does, plus ETCDFED_DNS_SERVERS (see internal/resolver) so that
// `etcdfed dev etcdctl` reaches members by their DNS names without touching
// the machine's resolver.
package main

import (
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"

	"github.com/etcdfed/etcdfed/hack/tools/etcd/internal/resolver"
)

func main() {
	resolver.Install()
	ctlv3.MustStart()
}
