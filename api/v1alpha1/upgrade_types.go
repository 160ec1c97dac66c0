package v1alpha1

// Versions and version changes (spec.version).
//
// etcdfed knows the etcd minor versions in SupportedMinorVersions: it runs
// their flags, reads their status and follows their upgrade and downgrade
// procedures. A version of another minor is "unknown" and refused by the
// CRD (the rule on spec.version names the supported ones); so is a change
// of spec.version by more than one minor at a time, up or down, because
// etcd itself upgrades and downgrades one minor at a time. Patch releases
// within a known minor are all accepted: an image that does not exist
// fails the first member's pod and halts the rollout (Progressing reason
// RolloutHalted).

// SupportedMinorVersions are the etcd minor versions etcdfed runs, oldest
// first. Keep in step with the rule on EtcdClusterSpec.Version.
var SupportedMinorVersions = []string{"3.5", "3.6"}

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
