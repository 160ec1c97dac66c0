// Package etcddial holds the connection settings shared by etcdfed's own
// etcd clients: the hub's (membership, observation, snapshots) and each
// spoke's (its members' health).
package etcddial

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// MaxReconnectDelay bounds the wait between two attempts to connect to a
// member that did not answer. gRPC's default doubles the wait up to 120 s,
// so a member away for half a minute (restarted for an upgrade or with
// --force-new-cluster, a zone back from a failure) could stay unreachable to
// its observers for a minute after it came back, reported silent by every
// pass in between.
const MaxReconnectDelay = 2 * time.Second

// Reconnect is the dial option with that bound. connectTimeout caps one
// connection attempt (gRPC's default, 20 s, lets an address that drops
// packets hold each attempt that long).
func Reconnect(connectTimeout time.Duration) grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  250 * time.Millisecond,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   MaxReconnectDelay,
		},
		MinConnectTimeout: connectTimeout,
	})
}
