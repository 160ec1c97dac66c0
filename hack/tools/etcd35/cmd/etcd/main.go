// Command etcd is the etcd 3.5 server, built from go.etcd.io/etcd/server/v3
// at the 3.5 release pinned in this module, into bin/etcd-<version> beside
// the current bin/etcd (3.6): the old side of the upgrade and downgrade
// tests. Like hack/tools/etcd's, the one addition is ETCDFED_DNS_SERVERS
// (see internal/resolver, a copy of hack/tools/etcd's: a module cannot
// import another module's internal package).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/etcdfed/etcdfed/hack/tools/etcd35/internal/resolver"
)

func main() {
	resolver.Install()
	etcdmain.Main(os.Args)
}
