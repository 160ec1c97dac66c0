// Package resolverenv points Go's DNS resolver at the DNS servers named in the
// ETCDFED_DNS_SERVERS environment variable (comma-separated host:port).
//
// The local environment runs etcd as plain processes on one machine, where
// the ring's DNS servers listen on loopback ports other than 53 and the
// machine's /etc/resolv.conf must not be touched. Kubelet would give a pod
// its cluster DNS; this package is the local stand-in. Without the variable
// nothing changes. hack/tools/etcd/internal/resolver and
// hack/tools/etcd35/internal/resolver hold the same code for the etcd 3.6 and
// 3.5 builds, which live in modules of their own on purpose (each pins its
// etcd release's dependencies); a change here goes to both.
package resolverenv

import (
	"context"
	"net"
	"os"
	"strings"
	"sync/atomic"
)

// EnvVar names the variable read by Install.
const EnvVar = "ETCDFED_DNS_SERVERS"

// Install replaces net.DefaultResolver when EnvVar is set. Each query goes to
// the next server in turn, so one dead server costs one retry, not a hang.
func Install() {
	servers := parse(os.Getenv(EnvVar))
	if len(servers) == 0 {
		return
	}
	var next atomic.Uint32
	net.DefaultResolver = &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			var err error
			for range servers {
				server := servers[int(next.Add(1))%len(servers)]
				var c net.Conn
				if c, err = d.DialContext(ctx, network, server); err == nil {
					return c, nil
				}
			}
			return nil, err
		},
	}
}

func parse(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
