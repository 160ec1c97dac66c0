// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at
// the version pinned in this module, as the etcd repository's own main
// package does (the root module go.etcd.io/etcd/v3 is not published on the
// module proxy for every patch release; the server module is). The one
// addition: ETCDFED_DNS_SERVERS points its resolver at the ring's DNS (see
// internal/resolver); unset, it is upstream etcd.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/etcdfed/etcdfed/hack/tools/etcd/internal/resolver"
)

func main() {
	resolver.Install()
	etcdmain.Main(os.Args)
}
