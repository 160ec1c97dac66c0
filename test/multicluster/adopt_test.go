package multicluster

import (
	"context"
	"path/filepath"
	"testing"
)

// TestScenarioAdopt: a three-member etcd started outside etcdfed (bin/etcd
// processes on loopback, its own CA, TLS), holding data and serving the
// recorded workload, adopted into a five-member ring over the three member
// clusters (spec.adopt: etcdfed's members join as learners and are
// promoted one at a time), then its originals retired (spec.adopt.retire:
// one at a time, the leader last): the same cluster ID, every key
// present, failure tolerance never 0 at any sampled moment, linearizable,
// nothing acknowledged lost, every watch complete (AdoptSpec).
func TestScenarioAdopt(t *testing.T) {
	skipUnlessScenarios(t, "adopting an etcd cluster started outside etcdfed")
	topo := hubTopology(t)
	ctx := context.Background()
	etcd := AdoptSpec(ctx, AdoptSpecInput{T: t, Topology: topo, Namespace: "adopt", Name: "adopt", Domain: "adopt.etcd.test", Replicas: 5, Originals: 3, Keys: 500,
		Etcdfed: filepath.Join(hubFx.bin, "etcdfed")})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}

// TestScenarioAdoptWithAuth: the same with etcd authentication already on
// in the cluster outside etcdfed (user root, as its administrator set it
// up; the workload runs as root), adopted through `etcdfed adopt` from
// files (the CA, root's client certificate: spec.adopt.clientSecretName)
// with spec.tls.auth Enabled, and retired through `etcdfed adopt
// --retire`: the same cluster ID, every key present, failure tolerance
// never 0, linearizable, nothing acknowledged lost, every watch complete,
// the originals gone, authentication still on and the hub's own user
// added as root.
func TestScenarioAdoptWithAuth(t *testing.T) {
	skipUnlessScenarios(t, "adopting an etcd cluster with authentication on, through etcdfed adopt")
	topo := hubTopology(t)
	ctx := context.Background()
	etcd := AdoptSpec(ctx, AdoptSpecInput{T: t, Topology: topo, Namespace: "adopt-auth", Name: "adoptauth", Domain: "adoptauth.etcd.test", Replicas: 3, Originals: 3, Keys: 500,
		Etcdfed: filepath.Join(hubFx.bin, "etcdfed"), AuthOn: true, ThroughCommand: true})
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
}
