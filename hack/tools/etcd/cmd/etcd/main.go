// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at
// the version pinned in this module. It is what the etcd repository's own
// main package does; the root module go.etcd.io/etcd/v3 is not published on
// the module proxy for every patch release, the server module is.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
