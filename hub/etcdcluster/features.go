package etcdcluster

import (
	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/pkg/topology"
)

// A feature is one thing the hub does for a ring, held in one type: what
// it records from the pass's observation, its part of the planner's input
// (built once per pass from the snapshot, the annotations read once:
// requests.go), what it records in the ledger once the planner decided,
// and its fields of the status. Its planner steps are its entries in the
// action table (actions.go); a condition it colours has one setter in
// status.go that asks it. decide and computeStatus loop over the
// features; nothing else writes the ledger in decide.
type feature interface {
	// observe records in the ledger st what this pass observed, before
	// anything is placed or planned.
	observe(st *etcdfedv1.EtcdClusterStatus, d *decision)
	// input adds the feature's part of the planner's input, from the
	// ledger st as observed.
	input(in *planner.Input, st *etcdfedv1.EtcdClusterStatus)
	// record writes the feature's part of the ledger st for the
	// decision d (d.plan), before apply carries it out (rule 3).
	record(st *etcdfedv1.EtcdClusterStatus, d *decision)
	// status sets the feature's fields of the pass's status st.
	status(st *etcdfedv1.EtcdClusterStatus, d *decision, res applyResult)
}

// features are the hub's features for one pass, by name for what reads
// one of them (a condition's setter, the upkeep) and in all in the
// ledger's order: each stage runs them in this order.
type features struct {
	membership  *membership
	adoption    *adoption
	upgrade     *upgrade
	distance    *distance
	recovery    *recovery
	caRotation  *caRotation
	maintenance *maintenance
	leader      *leader
	restore     *restore
	disruption  *disruption
	all         []feature
}

// newFeatures builds the features of a pass over s.
func newFeatures(s *snapshot) *features {
	fs := &features{
		membership:  &membership{s: s},
		adoption:    &adoption{s: s},
		upgrade:     &upgrade{s: s},
		distance:    &distance{s: s},
		recovery:    newRecovery(s),
		caRotation:  &caRotation{s: s},
		maintenance: &maintenance{s: s},
		leader:      &leader{s: s},
		restore:     &restore{s: s},
		disruption:  &disruption{s: s},
	}
	// Adoption records its originals from the step before membership
	// records the step's end; the recovery request's outcome, the CA
	// rotation's phase, the scheduled defragmentation and the leader's
	// placement follow the operation membership recorded.
	fs.all = []feature{fs.adoption, fs.membership, fs.upgrade, fs.distance, fs.recovery, fs.caRotation, fs.maintenance, fs.leader, fs.restore, fs.disruption}
	return fs
}

// observe records the pass's observation in the ledger st.
func (fs *features) observe(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	for _, f := range fs.all {
		f.observe(st, d)
	}
}

// plannerInput joins the ledger st with the objects and etcd for the
// planner: every feature's part.
func (fs *features) plannerInput(st *etcdfedv1.EtcdClusterStatus, placement topology.Result) planner.Input {
	in := planner.Input{Placement: placement}
	for _, f := range fs.all {
		f.input(&in, st)
	}
	return in
}

// record writes the decision d into the ledger st.
func (fs *features) record(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	for _, f := range fs.all {
		f.record(st, d)
	}
}

// status sets every feature's fields of the status st.
func (fs *features) status(st *etcdfedv1.EtcdClusterStatus, d *decision, res applyResult) {
	for _, f := range fs.all {
		f.status(st, d, res)
	}
}

// plannerInput is the planner's input for s and the ledger st, as decide
// builds it.
func plannerInput(s *snapshot, st *etcdfedv1.EtcdClusterStatus, placement topology.Result) planner.Input {
	return newFeatures(s).plannerInput(st, placement)
}
