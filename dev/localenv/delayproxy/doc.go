// Package delayproxy is the local environment's user-space distance: a
// transparent proxy that delays, jitters and loses traffic between two
// units (zones, member clusters) on loopback, where the kernel offers no
// netem qdisc.
//
// The environment sends a unit's traffic for another unit's block to one
// of the proxy's ports with an iptables REDIRECT in the nat table (one
// port per ordered pair, per protocol and, for UDP, per destination). A
// TCP route learns the original destination with SO_ORIGINAL_DST; a UDP
// route has one destination of its own, since the kernel keeps no
// original destination for a redirected datagram that a socket could
// read (IP_ORIGDSTADDR reports the rewritten one). The proxy dials the
// destination FROM THE SENDER'S ADDRESS (the accepted connection's or
// datagram's source: the pod IP after the environment's SNAT), so that a
// peer that checks the client's address against its certificate (etcd)
// sees the same address as without the proxy, and marks its own sockets
// (SO_MARK) so that the nat rules let them through.
//
// Each direction of a TCP connection is one reader and one writer: the
// reader stamps each chunk with its delivery time (half the round trip,
// plus or minus half the jitter, never before the previous chunk: bytes
// are never reordered; a lost segment adds a retransmission timeout),
// the writer sleeps until then and writes. At most QueueChunks chunks of
// ChunkSize bytes wait per direction; a full queue stops the reader, so
// a slow receiver slows the sender as TCP would. UDP datagrams are
// dropped with the loss probability and each delivered after its own
// delay (at most MaxInFlight per route at once; more are dropped, as a
// full queue would).
//
// A route's link can change at any time: connections and flows already
// proxied follow the new numbers from their next chunk on.
package delayproxy
