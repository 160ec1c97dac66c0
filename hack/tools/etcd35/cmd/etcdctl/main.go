// Command etcdctl is upstream etcdctl at the 3.5 release pinned in this
// module (its v3 API, as upstream's main package runs by default), plus
// ETCDFED_DNS_SERVERS (see internal/resolver), like hack/tools/etcd's: the
// etcdctl of the etcd 3.5 image (bin/etcdctl-<version>).
package main

import (
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"

	"github.com/etcdfed/etcdfed/hack/tools/etcd35/internal/resolver"
)

func main() {
	resolver.Install()
	ctlv3.MustStart()
}
