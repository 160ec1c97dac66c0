// Package nemesis draws fault schedules for a ring from a seed: network
// partitions of any shape between the hub, member clusters and zones,
// one-way cuts, member clusters killed and returned, the hub killed or
// stopped and started, distance between units (profile wan only), each
// held for a random time that sometimes exceeds the ring's graces and
// sometimes does not, some schedules with
// automatic quorum-loss recovery. The same seed gives the same schedules
// (schedule i depends only on the seed, i and the profile), so a failure
// is replayed from the seed the run printed. Every fault a schedule
// injects it also heals, before the schedule ends.
//
// Generate and the Summary are pure; test/multicluster's TestNemesis
// runs the schedules on the local environment under the recorded
// workload and the leader watch of dev/workload.
package nemesis
