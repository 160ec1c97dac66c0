// Command etcdctl is upstream etcdctl at the 3.7 release pinned in this
// module, plus ETCDFED_DNS_SERVERS (see internal/resolver), like
// hack/tools/etcd's: the etcdctl of the etcd 3.7 image.
package main

import (
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"

	"github.com/etcdfed/etcdfed/hack/tools/etcd37/internal/resolver"
)

func main() {
	resolver.Install()
	ctlv3.MustStart()
}
