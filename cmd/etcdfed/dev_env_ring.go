package main

import (
	"context"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

// ringEnv returns the ring part of `etcdfed dev env`: ETCDCTL_ENDPOINTS
// (the members' client URLs with their DNS names, comma separated) and
// ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY (files with a client
// certificate for the ring), once an EtcdCluster exists in the hub. Return
// nil while there is none: dev env then says so in a comment.
//
// HOOK for the hub (issue 7): read the demo EtcdCluster from the hub
// (kubeconfig st.KubeconfigPath(localenv.HubClusterName)), take
// status.endpoints, write the CA and a client certificate under
// st.Dir (for example <state>/ring/<name>/{ca.crt,client.crt,client.key})
// and return them here. Names resolve through ETCDFED_DNS_SERVERS, which
// dev env always exports.
var ringEnv = func(_ context.Context, _ *localenv.State) ([]envVar, error) {
	return nil, nil
}
