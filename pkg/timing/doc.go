// Package timing turns measured round trips between member clusters into
// etcd's heartbeat interval and election timeout (rule 15). It is pure: no
// client, no clock (the caller passes the time), no randomness.
//
//   - Window keeps the last round trips a spoke measured to one peer
//     (memberlist's probes) and gives their median and p99.
//   - Moved is the spoke's hysteresis rule of round trips: one is
//     published again only when its median or p99 moved by more than a
//     quarter and more than 10 ms (the median) or 200 ms (the p99), so a
//     link's jitter, or a loaded prober's stalled probes, write nothing.
//   - Confirm is the spoke's hysteresis over probes: a significant move
//     is published only once Confirmations consecutive probes of the peer
//     showed it, so a loaded prober's median flipping between its fast
//     and its stalled probes writes nothing, and a real change of
//     distance is published two probes after the window's median moved.
//   - Matrix merges the spokes' reports into the ring's matrix, keeping an
//     entry whose move matters to none of the ring's decisions
//     (RecordAgain: the heartbeat it asks for moved by RecordMillis, or
//     with leader placement Auto its median moved as Moved says; a ring
//     that derives nothing from it records each pair once), so a loaded
//     prober's medians at loopback, which ask for etcd's default
//     heartbeat, are not recorded in every ring across the pair.
//   - Choose derives heartbeat and election timeout from the matrix
//     following etcd's tuning guide
//     (https://etcd.io/docs/v3.6/tuning/#time-parameters): the heartbeat
//     up to 1.5 round trips between members (here 1.5 medians between
//     the voters' clusters plus a quarter of the p99's excess over the
//     median for jitter, at most half a median, the largest over the
//     pairs, in steps of
//     10 ms, never below MinHeartbeat, 100 ms), the election timeout ten
//     times the heartbeat (never below MinElection, 1000 ms, never above
//     etcd's limit 50000 ms). The floors are etcd's defaults: lower ones
//     fail over faster at a distance, but their stability under load is
//     not measured yet (docs/measurements/wan.md). A chosen value changes
//     only when the new one differs by more than a quarter and by at least
//     50 ms, so a jittering link does not roll the ring; on a running ring
//     only once the round trips between the voters' clusters have stayed
//     as recorded for Settle (Held), so a restarted spoke's first probes,
//     taken on a loaded machine, do not roll it. At zero distance and
//     without a measurement it yields etcd's defaults.
//
// The round trips are those of the spokes' gossip (UDP ping and ack
// between the spoke pods), not of etcd's own peer traffic: the same
// network path between member clusters in the usual deployment, without
// the members' own load.
package timing
