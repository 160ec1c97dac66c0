// Package drill runs `etcdfed drill zone-failure`: it proves, on a live
// ring, that losing a zone loses nothing and heals itself. Run checks that
// the ring is healthy enough to drill (Preflight), starts the recorded
// client workload of dev/workload against the ring's client
// endpoints, fails the zone (cordon through the EtcdCluster's spec, which
// works on any deployment; kill or partition through a fault injector,
// which only the local environment offers), follows the EtcdCluster's
// status, restores the zone, waits for the ring to heal, checks the
// workload and returns a Report. The analysis of the status samples
// (Analyze) and the preflight are pure functions with table tests.
package drill
