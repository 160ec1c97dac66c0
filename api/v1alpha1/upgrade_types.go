package v1alpha1

// Versions and version changes (spec.version).
//
// Which etcd releases etcdfed runs and which changes of spec.version it
// makes in one step are pkg/etcdversion's policy: the rules on
// EtcdClusterSpec.Version are generated from it (make generate), the hub's
// planner applies it again to the versions the members run, and the
// version matrix in docs/upgrades.md is rendered from it. A patch
// release the policy accepts but whose image does not exist fails the
// first member's pod and halts the rollout (Progressing reason
// RolloutHalted).

// Condition reasons of a version change, written by the hub on the
// EtcdCluster.
const (
	// ReasonUpgrading (Progressing=True): members are rolled one at a time
	// to a higher spec.version; the message names the member in flight and
	// how many run the new version.
	ReasonUpgrading = "Upgrading"
	// ReasonDowngrading (Progressing=True): etcd's downgrade is enabled and
	// members are rolled one at a time to the lower spec.version.
	ReasonDowngrading = "Downgrading"
	// ReasonRolloutHalted (Progressing=False, Degraded=True): a member
	// rolled to the new spec does not come up on it; the rollout stops and
	// nothing else is restarted. The message names the member and why (its
	// pod's state, as its spoke reports it). Fix the spec (for example set
	// spec.version back) to go on.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonDowngradeRefused (Progressing=False, Degraded=True): etcd
	// refused to enable the downgrade to spec.version (its message is
	// quoted); no member is restarted.
	ReasonDowngradeRefused = "DowngradeRefused"
)

// ReasonContainerFailing (EtcdMember PodReady=False, written by the spoke):
// the etcd container of the pod of the object's latest generation cannot
// run: it cannot be created (no such image or binary), or it crashes
// (CrashLoopBackOff). The message quotes the container's state. The hub
// halts a rollout on it (ReasonRolloutHalted).
const ReasonContainerFailing = "ContainerFailing"
