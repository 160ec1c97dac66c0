package planner

import (
	"time"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

// Input is everything the planner looks at.
type Input struct {
	// Now is the hub's clock.
	Now time.Time
	// Replicas is spec.replicas.
	Replicas int
	// Automatic is spec.failurePolicy.automatic: replace failed members.
	Automatic bool
	// MovesPaused is spec.topology.pauseMoves: no Move of a live member
	// begins (the one in flight finishes).
	MovesPaused bool
	// BreakBeforeMake moves live members break before make (a Replace),
	// as before rule 13: the annotation etcdfed.dev/break-before-make,
	// for measuring the difference.
	BreakBeforeMake bool
	// MemberGrace is how long a member may be unhealthy before it is
	// replaced.
	MemberGrace time.Duration

	// Bootstrapped is true once the etcd cluster has formed (status.clusterID
	// is set).
	Bootstrapped bool
	// Operation is the operation in flight (status.operation), nil when none.
	Operation *Operation
	// LastIncarnation is the highest incarnation handed out.
	LastIncarnation int64

	// Etcd is etcd's own view.
	Etcd Etcd
	// Members is the hub's record of each member (status.members), joined
	// with the EtcdMember objects found in the member clusters.
	Members []Member
	// Placement is what pkg/topology wants, computed from the same view.
	Placement topology.Result
	// Version is spec.version and Backup the pre-upgrade snapshot's state
	// (upgrade.go).
	Version string
	Backup  Backup

	// Unseen lists eligible member clusters the hub cannot fully see yet
	// (not visible, or their spoke has not reported), with why. Bootstrap
	// waits for them: the founding placement is never made on a partial
	// view.
	Unseen []string

	// Maintenance is the policy for members' databases (defrag.go).
	Maintenance Maintenance
	// Quorum is what the planner needs to recover a ring that lost its
	// quorum (recovery.go).
	Quorum QuorumInput
	// Restore is the state of the snapshot the cluster is founded from.
	Restore Restore
	// CA is the state of a CA rotation (carotation.go).
	CA CARotation
	// Adopt is the adoption of a running cluster (adopt.go).
	Adopt Adopt
	// Leader is the leader's placement (leader.go).
	Leader LeaderInput
}

// Restore is the founding snapshot's state (spec.bootstrap.fromSnapshot).
type Restore struct {
	// Wanted: the cluster is founded from a snapshot.
	Wanted bool
	// Verified: the hub resolved and checked it (status.restore); every
	// founding member restores that one object.
	Verified bool
	// Message says why not yet (the SnapshotVerified condition's).
	Message string
}

// Etcd is what etcd says.
type Etcd struct {
	// Reachable is true when the member list was read (a quorum answered).
	Reachable bool
	// Error explains why not.
	Error string
	// Members is the member list.
	Members []ListEntry
	// LeaderID is the leader's ID, 0 when unknown.
	LeaderID uint64
	// ClusterID is the etcd cluster ID.
	ClusterID uint64
	// ClusterVersion is the cluster version etcd reports (such as 3.5.0),
	// "" when unknown; Downgrade is etcd's downgrade state (upgrade.go).
	ClusterVersion string
	Downgrade      Downgrade
	// Alarms etcd has raised, when AlarmsKnown (the alarm list was read).
	Alarms      []Alarm
	AlarmsKnown bool
}

// ListEntry is one entry of etcd's member list, with its health. (Not to be
// confused with the EtcdMember resource, the member's object in its member
// cluster: the planner sees that as Object.)
type ListEntry struct {
	ID         uint64
	Name       string // empty until the member has started once
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
	// Healthy is true when the member answered a status call (from the hub,
	// or its spoke reported it healthy). An alarm does not make a member
	// unhealthy: alarms are in Etcd.Alarms.
	Healthy bool
	// Version is the etcd server version the member reported in its status
	// call, "" when it did not answer; RaftIndex its raft index then.
	Version   string
	RaftIndex uint64
	// StorageVersion is the member's storage version (etcd 3.6; "" on
	// 3.5), which a downgrade waits on.
	StorageVersion string
	// DBSize, DBSizeInUse and DBSizeQuota are the member's database file
	// size, the part of it in use, and its quota, in bytes, from the
	// member's last status answer (0 when unknown).
	DBSize, DBSizeInUse, DBSizeQuota int64
	// LeaderlessSince is set when the member answered the hub's status
	// request without naming a leader: since when it has answered every
	// request so (the hub's clock; zero when it named a leader or did not
	// answer). Its process runs on its data; it is only out of touch with
	// its peers.
	LeaderlessSince time.Time
}

// Started reports whether the member has published its name, i.e. its
// process has joined once.
func (m ListEntry) Started() bool { return m.Name != "" }

// Member is the hub's knowledge of one member name.
type Member struct {
	// Name, e.g. main-0.
	Name string
	// Domain where the hub placed the current incarnation.
	Domain topology.Domain
	// Incarnation the hub assigned.
	Incarnation int64
	// ID is the etcd ID the hub recorded for this incarnation, 0 if none yet.
	ID uint64
	// Ready as last recorded, and when that last changed (hub clock).
	Ready          bool
	ReadyChangedAt time.Time
	// ClusterVisible is true when the hub currently sees the member's
	// cluster (its spoke Lease is fresh on the hub's clock).
	ClusterVisible bool
	// DomainFailed is true when the member's failure domain is declared
	// failed: its cluster (stale spoke Lease and a majority of the other
	// spokes agree, rule 8), or its zone inside a visible cluster (stale
	// node Leases and a majority of the peers outside the zone lost it).
	// Its members are moved by the placement, not replaced in place.
	DomainFailed bool
	// DomainClosed is true when no node of the member's zone takes new
	// pods (its spoke reports every one cordoned or not Ready): a
	// replacement there could not start, so a member that failed there is
	// moved by the placement (the domain is NoSchedulableNode), not
	// replaced in place.
	DomainClosed bool
	// Fenced says who confirmed, and when, that this incarnation cannot
	// serve any more (fencing, annotation etcdfed.dev/fenced); "" when no
	// one did.
	Fenced string
	// Object is the member's EtcdMember object in Domain's cluster; nil
	// when absent or not visible.
	Object *Object
	// StaleIn lists visible clusters other than Domain's that still hold an
	// EtcdMember object of this member (left behind by a move).
	StaleIn []string
	// Superseded is true when Domain's cluster, visible, holds an
	// EtcdMember of an older incarnation of this member beside Object: a
	// Move inside the cluster keeps its old incarnation's until its ID is
	// removed, then deletes it.
	Superseded bool
}

// Object is what the planner needs of a member's EtcdMember object.
type Object struct {
	// Incarnation in the object's spec.
	Incarnation int64
	// Bootstrap is the spec.bootstrap state: "" (not set), "new" or
	// "existing".
	Bootstrap string
	// PeerURL the spoke reports (status.peerURL), "" until known.
	PeerURL string
	// StatusIncarnation is the incarnation the status describes.
	StatusIncarnation int64
	// Healthy is the spoke's MemberHealthy condition.
	Healthy bool
	// VolumeLost is true when the spoke reports the incarnation's volume
	// gone (its data is lost; only a new incarnation can help).
	VolumeLost bool
	// RestartRequestedAt is when the hub last asked the spoke to restart
	// the member's pod in place (ActRestartMember); zero when never.
	RestartRequestedAt time.Time
	// Outdated is true when the object's spec differs from what the
	// EtcdCluster's spec wants in a way that restarts the pod (image,
	// version, etcd flags, pod template, storage, exposure): the member
	// must be rolled. OutdatedTrust is true when the only difference is
	// the CA the member must trust or be issued by (a CA rotation).
	Outdated      bool
	OutdatedTrust bool
	// Changes names what the new spec changes when Outdated (the fields,
	// old and new values), for the Roll's reason.
	Changes string
	// Settled is true when the spoke has acted on the object's latest
	// generation and the pod is ready.
	Settled bool
	// Failing says why the pod of the object's latest generation cannot
	// run (its container cannot be created, or crashes), "" when it can.
	Failing string
	// Pending says why the pod of the object's latest generation has not
	// started (not scheduled: no node matches or has room; containers not
	// started: an image not pulled), "" when it has.
	Pending string
	// DisruptionRequested is true while the spoke reports the node of the
	// member's pod cordoned (a drain waits for the hub's grant), since
	// DisruptionRequestedSince, for DisruptionReason.
	DisruptionRequested      bool
	DisruptionRequestedSince time.Time
	DisruptionReason         string
	// Etcd is the member's own etcd view as its spoke last read it (works
	// without quorum); nil when none.
	Etcd *EtcdView
	// ForceNewCluster is the object's spec.forceNewCluster.
	ForceNewCluster string
	// NamedAfterMember is true for an object written before the naming
	// scheme, named after the member alone: its spoke's Service and
	// disruption budget select every pod of the member in the cluster, so
	// a second incarnation beside it there would be selected too.
	NamedAfterMember bool
}

// Operation is the operation in flight, as recorded in status.operation.
type Operation struct {
	Type        OpType
	Member      string
	MemberID    uint64 // the ID being removed (Remove, Replace)
	NewMemberID uint64 // the ID of the member being added (Add, Replace), once known
	Incarnation int64
	// FromIncarnation is the incarnation a Move retires, and FromAddress
	// its address (the stable DNS name keeps it until its ID is removed;
	// the planner carries it, the reconciler reads it).
	FromIncarnation int64
	FromAddress     string
	FromDNSName     string
	From            *topology.Domain
	To              *topology.Domain
	Reason          string
	Step            Action
	StartedAt       time.Time
	// StepStartedAt is when Step was first recorded; zero when unknown
	// (recorded by an older hub) or not yet recorded (a step this pass
	// decides).
	StepStartedAt time.Time
}

// OpType is the kind of operation.
type OpType string

// Operation types, the same strings as the API's.
const (
	// OpBootstrap founds the cluster with every member of the first
	// placement.
	OpBootstrap OpType = "Bootstrap"
	// OpAdd adds a member as a learner and promotes it.
	OpAdd OpType = "Add"
	// OpRemove removes a member (leadership moved away first).
	OpRemove OpType = "Remove"
	// OpReplace removes a member's etcd ID and adds a new incarnation under
	// the same name, in the same or another failure domain: break before
	// make, for a member whose old incarnation is dead (or whose object
	// there, named after the member alone, cannot have a second beside it).
	OpReplace OpType = "Replace"
	// OpMove moves a live member make-before-break (rule 13): its new
	// incarnation, in another member cluster or another zone of the same
	// one (an object of its own there), under its own DNS name
	// (Assignment.OwnName), joins as a learner and is promoted beside the
	// old one; then leadership leaves the old incarnation (MemberID), its
	// ID is removed and its object deleted. Failure tolerance never drops
	// below what it was.
	OpMove OpType = "Move"
	// OpRoll restarts one member on the EtcdCluster's current spec (image,
	// version, flags, pod template) on its own volume: leadership moved
	// away first, done once the member is a ready voter again. A rollout
	// is one Roll after another, followers first, the leader last.
	OpRoll OpType = "Roll"
	// OpRecover restarts the surviving member (Member, MemberID) of a ring
	// that lost its quorum as a one-member cluster from its own data
	// (recovery.go); the members that were gone come back afterwards as
	// Adds under their names with new incarnations.
	OpRecover OpType = "Recover"
	// OpRotateCA changes the ring's CA Secret, one step of a CA rotation
	// (carotation.go): Step is ActAddCA, ActSwitchCA or ActDropCA.
	OpRotateCA OpType = "RotateCA"
)

// ReasonCARotation is the reason of a CA rotation's operations (RotateCA,
// and the Rolls that restart members on the changed trust).
const ReasonCARotation = "CARotation"

// ReasonSpecChanged is the reason of a Roll operation.
const ReasonSpecChanged = "SpecChanged"

// Action is what the reconciler must do now.
type Action string

const (
	// ActNone: nothing to change; the cluster is where it should be.
	ActNone Action = "None"
	// ActWait: nothing to do now; see Reason, and decide again after
	// RequeueAfter. Inside an operation the decision carries the operation
	// with its step and message updated (to be recorded); outside one it
	// carries none.
	ActWait Action = "Wait"
	// ActBegin: record Decision.Operation (and the assignment it implies)
	// in status before anything is changed.
	ActBegin Action = "Begin"
	// ActCreateObjects: write the EtcdMember objects (and their TLS Secrets)
	// of Decision.Members, without bootstrap.
	ActCreateObjects Action = "CreateObjects"
	// ActStartBootstrap: set bootstrap "new" with the full initial cluster on
	// every founding member.
	ActStartBootstrap Action = "StartBootstrap"
	// ActFinishBootstrap: record the cluster ID; founding members switch to
	// "existing".
	ActFinishBootstrap Action = "FinishBootstrap"
	// ActAddLearner: MemberAddAsLearner with the member's peer URL.
	ActAddLearner Action = "AddLearner"
	// ActStartMember: set bootstrap "existing" on the member's object.
	ActStartMember Action = "StartMember"
	// ActPromote: MemberPromote; "learner not ready" means retry.
	ActPromote Action = "Promote"
	// ActMoveLeader: MoveLeader to Decision.TransfereeID.
	ActMoveLeader Action = "MoveLeader"
	// ActRemoveMember: MemberRemove(Decision.MemberID).
	ActRemoveMember Action = "RemoveMember"
	// ActDeleteObject: delete the member's EtcdMember object in
	// Decision.From's cluster (the spoke keeps its volume).
	ActDeleteObject Action = "DeleteObject"
	// ActUpdateObject: write the EtcdCluster's current spec to the member's
	// object (Roll); its spoke replaces the pod on the same volume.
	ActUpdateObject Action = "UpdateObject"
	// ActForceNewCluster: set spec.forceNewCluster on the survivor's object
	// (Recover); its spoke restarts it as a one-member cluster.
	ActForceNewCluster Action = "ForceNewCluster"
	// ActClearForceNewCluster: clear spec.forceNewCluster on the survivor's
	// object (Recover); its spoke restarts it without the flag.
	ActClearForceNewCluster Action = "ClearForceNewCluster"
	// ActFinish: the operation is done; clear it and record the result.
	ActFinish Action = "Finish"
	// ActEnableDowngrade: etcd's downgrade validate, then enable, to
	// Decision.DowngradeTo (the first step of a downgrade's first Roll).
	ActEnableDowngrade Action = "EnableDowngrade"
	// ActCancelDowngrade: etcd's downgrade cancel, when etcd has a
	// downgrade enabled that spec.version no longer asks for (the
	// version set back above its target); a step of the Roll in flight.
	ActCancelDowngrade Action = "CancelDowngrade"
	// ActRequestBackup: ask for an on-demand snapshot named
	// Decision.BackupRequest (before the first Roll of a version change).
	ActRequestBackup Action = "RequestBackup"
	// ActAddCA: generate a new CA and store it in the CA Secret beside the
	// issuing one (RotateCA). Never a second one: a stored next CA is
	// kept.
	ActAddCA Action = "AddCA"
	// ActSwitchCA: make the next CA the issuing one, keeping the old one
	// as trusted (RotateCA).
	ActSwitchCA Action = "SwitchCA"
	// ActDropCA: remove the old CA from the CA Secret (RotateCA).
	ActDropCA Action = "DropCA"
	// ActCompleteCARotation: record the CA rotation as completed (no
	// operation; nothing is written but the status).
	ActCompleteCARotation Action = "CompleteCARotation"
	// ActRefuseCARotation: record the CA rotation request as refused
	// (Decision.Reason says why).
	ActRefuseCARotation Action = "RefuseCARotation"
	// ActHoldCARotation: nothing to change; record that the CA rotation
	// holds after its Trusting phase until the user answers (Decision.Reason
	// says whom to restart and how to answer). It is the planner's last
	// word: anything else to do (a membership change, a drain's grant, a
	// defragmentation) goes first, since a hold may last hours.
	ActHoldCARotation Action = "HoldCARotation"
)

// Decision is the planner's answer.
type Decision struct {
	Action Action
	// Reason explains the decision in words a user reads in a condition.
	Reason string
	// Operation is the operation to record with the decision: the new one
	// with ActBegin, the one in flight with its step updated with a step
	// or with ActWait inside an operation. It is nil when no operation is
	// in flight (ActNone, ActWait outside an operation) and when one ends
	// (ActFinish, ActFinishBootstrap): the reconciler then clears
	// status.operation.
	Operation *Operation
	// Member is the member acted on, MemberID its etcd ID where relevant.
	Member   string
	MemberID uint64
	// Members lists the members an ActCreateObjects or ActStartBootstrap
	// covers.
	Members []string
	// TransfereeID is the new leader for ActMoveLeader.
	TransfereeID uint64
	// Domain is where the member goes (ActBegin of Add/Replace,
	// ActCreateObjects); From is where an object is deleted.
	Domain topology.Domain
	From   topology.Domain
	// Assign lists new (member, domain, incarnation) assignments to record
	// with ActBegin.
	Assign []Assignment
	// RequeueAfter is set with ActWait and for steps that poll.
	RequeueAfter time.Duration
	// Halted is set with an ActWait that only a change of spec can end (a
	// member that does not come up on the new version, a downgrade etcd
	// refuses, an adoption whose originals run a version spec.version
	// cannot join): the rollout stops, nothing else is restarted.
	Halted bool
	// GaveUp is set with the ActFinish of an Add or Replace whose new
	// incarnation could not start where it was placed (giveUpStart): the
	// member is in no etcd member list and is placed again. With the
	// ActFinish of a Roll it says the roll gave way because the member's
	// cluster does not start its pod (pending.go): the placement moves it
	// out of that cluster.
	GaveUp bool
	// DowngradeTo is the minor version of ActEnableDowngrade (3.5);
	// BackupRequest the request of ActRequestBackup.
	DowngradeTo   string
	BackupRequest string
	// Request is the UID of the recovery request a Recover begins from
	// (ActBegin): consumed, it is never acted on again.
	Request string
	// Leader is the leader placement's answer this pass (leader.go), for
	// the status; nil when not decided.
	Leader *topology.LeaderDecision
}

// Assignment places one incarnation of a member in a domain.
type Assignment struct {
	Member      string
	Domain      topology.Domain
	Incarnation int64
	// OwnName: the incarnation joins beside the member's live one (a
	// Move), so it is served under its own DNS name, not the stable one.
	OwnName bool
	// ID is the incarnation's etcd ID when it is already known (a Move
	// given up hands the member back to its old incarnation).
	ID uint64
}
