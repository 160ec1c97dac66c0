// Package shard says which EtcdClusters one hub owns when several hubs
// share the same member clusters, spokes, gossip and DNS, each over its own
// shard of the rings (`hub --shard NAME --shard-selector SELECTOR`).
//
// A hub acts only on the rings of its shard. Every hub controller that acts
// on an EtcdCluster reads it before acting; a ring outside the shard is let
// go at that read: nothing of it is written, deleted or released, not even
// its finalizers, so that the hub of its new shard takes it over from its
// status as a standby hub takes over from a leader. What must see every
// ring still does: the hub's cache of EtcdClusters is not filtered, so a
// domain or a CA held by a ring of another shard still counts as held
// (hub/tenancy), and a ring missing from a shard is never read as deleted.
package shard
