// Package etcddial holds the connection settings shared by etcdfed's own
// etcd clients: the hub's (membership, observation, snapshots) and each
// spoke's (its members' health).
//
// Creating a client never waits for a connection: none of them passes
// grpc.WithBlock, so with the etcd 3.6 client (grpc.DialContext without
// it) as with the 3.7 one (grpc.NewClient, which ignores WithBlock: "Make
// the etcd client creation non-blocking", etcd #21832, in 3.7 by
// https://github.com/etcd-io/etcd/pull/21942) clientv3.New returns at once
// and the first call connects. What bounds the waits is each call's
// context, one connection attempt
// (Reconnect's connectTimeout) and the time between attempts
// (MaxReconnectDelay). clientv3.Config.DialTimeout bounds no connection in
// either client: 3.7 uses it for the auth token, the version check and
// the first lease keep-alive timeout only. hub/etcdops's
// TestNewDoesNotWaitForAConnection holds the line.
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
