// Command etcd is the etcd 3.7 server, built from go.etcd.io/etcd/server/v3
// at the 3.7 release pinned in this module, into bin/etcd-<version> beside
// the current bin/etcd (3.6): the new side of the 3.6 to 3.7 upgrade and
// the old side of the 3.7 to 3.6 downgrade. Like hack/tools/etcd's, the one
// addition is ETCDFED_DNS_SERVERS (see internal/resolver, a copy of
// hack/tools/etcd's: a module cannot import another module's internal
// package).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/etcdfed/etcdfed/hack/tools/etcd37/internal/resolver"
)

func main() {
	resolver.Install()
	etcdmain.Main(os.Args)
}
