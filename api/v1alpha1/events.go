package v1alpha1

// Reasons of the events the hub records on EtcdClusters (`kubectl get
// events --field-selector involvedObject.kind=EtcdCluster`). Alerts and
// tests match them, so they are defined once, here, beside the condition
// reasons. Events whose reason is a condition's reason (a refusal by
// admission, a client's failed condition, a backup's failure) use that
// condition reason. The spoke's events on EtcdMembers use its condition
// reasons (spoke/member/reasons.go).
const (
	// Operations of the ring's one planner: the start of each kind
	// (Normal, the planner's reason as message) and its end.

	// EventMembershipChange: an Add, Remove, Replace or Bootstrap began.
	EventMembershipChange = "MembershipChange"
	// EventMembershipChangeDone: an Add, Remove, Replace or Bootstrap
	// ended, with how long it took.
	EventMembershipChangeDone = "MembershipChangeDone"
	// EventMemberRoll: a member restarts on the current spec (image,
	// flags, certificates), one at a time.
	EventMemberRoll = "MemberRoll"
	// EventMemberRollDone: a member's restart ended.
	EventMemberRollDone = "MemberRollDone"
	// EventDefragmentation: members' databases are defragmented, one at
	// a time.
	EventDefragmentation = "Defragmentation"
	// EventDefragmentationDone: the defragmentation ended.
	EventDefragmentationDone = "DefragmentationDone"
	// EventDisruptionGrant: a member's disruption (a node drain) is to
	// be granted.
	EventDisruptionGrant = "DisruptionGrant"
	// EventDisruptionGrantDone: the disrupted member is back.
	EventDisruptionGrantDone = "DisruptionGrantDone"
	// EventQuorumRecovery: a ring that lost its quorum is rebuilt from a
	// surviving member.
	EventQuorumRecovery = "QuorumRecovery"
	// EventQuorumRecoveryDone: the recovery ended.
	EventQuorumRecoveryDone = "QuorumRecoveryDone"
	// EventCARotation: a step of a CA rotation began (the same string as
	// the operations' ReasonCARotation).
	EventCARotation = ReasonCARotation
	// EventCARotationDone: a step of a CA rotation ended.
	EventCARotationDone = "CARotationDone"

	// Steps of the planner's operations, as they are taken.

	// EventBootstrapped: the first members formed the etcd cluster.
	EventBootstrapped = "Bootstrapped"
	// EventLearnerAdded: a new member joined etcd as a learner.
	EventLearnerAdded = "LearnerAdded"
	// EventMemberPromoted: a learner became a voting member.
	EventMemberPromoted = "MemberPromoted"
	// EventLeaderMoved: leadership moved off a member about to restart
	// or leave.
	EventLeaderMoved = "LeaderMoved"
	// EventLeaderPlacement: a MoveLeader operation began, to move
	// leadership where spec.leader wants it.
	EventLeaderPlacement = "LeaderPlacement"
	// EventLeaderPlacementDone: the MoveLeader operation ended (the
	// target leads, or it was abandoned, and why).
	EventLeaderPlacementDone = "LeaderPlacementDone"
	// EventLeaderPlaced: etcd moved leadership where spec.leader wants
	// it (from which member to which).
	EventLeaderPlaced = "LeaderPlaced"
	// EventMemberRemoved: a member was removed from etcd.
	EventMemberRemoved = "MemberRemoved"
	// EventAdopted: the hub reached an existing cluster to adopt
	// (spec.adopt) and recorded its original members.
	EventAdopted = "Adopted"
	// EventTakeOverFound: a rebuilt hub found the running ring of this
	// EtcdCluster's namespace and name in the member clusters and
	// recorded it as this EtcdCluster's (status.takeOver).
	EventTakeOverFound = "TakeOverFound"
	// EventTakeOverHeld (Warning): objects of a running ring were found
	// but the hub may not take it over yet; the message says why.
	EventTakeOverHeld = "TakeOverHeld"
	// EventShardConflict (Warning): the ring is of this hub's shard and
	// also of another live hub's (their selectors overlap, or one of them
	// is the unsharded hub): neither acts on it; the message names the
	// other shard and its hub.
	EventShardConflict = "ShardConflict"
	// EventTakenOver: etcd answered with the ring's cluster ID; the
	// members were taken over as they run (none restarted), and what was
	// reissued.
	EventTakenOver = "TakenOver"
	// EventTakeOverKeyless (Warning): a ring was taken over without its
	// CA's key (a rotation was asked for): the CA its members run on is
	// stored without the key until the rotation replaces it.
	EventTakeOverKeyless = "TakeOverKeyless"
	// EventMemberRetired: an original member of an adopted cluster was
	// removed from etcd (spec.adopt.retire).
	EventMemberRetired = "MemberRetired"
	// EventTimingChanged: the heartbeat interval or election timeout
	// etcd runs with changed (status.timing, rule 15); the members roll
	// onto it one at a time.
	EventTimingChanged = "TimingChanged"
	// EventBackupRequested: a snapshot was asked for before a version
	// change.
	EventBackupRequested = "BackupRequested"
	// EventDowngradeEnabled: etcd's downgrade to spec.version was enabled.
	EventDowngradeEnabled = "DowngradeEnabled"
	// EventDowngradeRefused (Warning): etcd refused the downgrade (the
	// same string as ReasonDowngradeRefused).
	EventDowngradeRefused = ReasonDowngradeRefused
	// EventDowngradeCancelled: etcd's downgrade was cancelled, spec.version
	// having moved back.
	EventDowngradeCancelled = "DowngradeCancelled"
	// EventMemberDefragmented: one member's database was defragmented.
	EventMemberDefragmented = "MemberDefragmented"
	// EventCompacted: the key space was compacted to recover from NOSPACE.
	EventCompacted = "Compacted"
	// EventAlarmDisarmed: NOSPACE was disarmed after compaction and
	// defragmentation.
	EventAlarmDisarmed = "AlarmDisarmed"
	// EventDisruptionAllowed: a member's disruption was granted; its node
	// may be drained.
	EventDisruptionAllowed = "DisruptionAllowed"
	// EventDisruptionTaken: the granted disruption was taken; the hub
	// waits for the member's return.
	EventDisruptionTaken = "DisruptionTaken"
	// EventCARotationAddCA, EventCARotationSwitchCA, EventCARotationDropCA:
	// the CA Secret changed for a rotation step: the new CA stored beside
	// the old, the new CA issuing, the old CA dropped.
	EventCARotationAddCA    = "CARotationAddCA"
	EventCARotationSwitchCA = "CARotationSwitchCA"
	EventCARotationDropCA   = "CARotationDropCA"
	// EventCARotationHeld: a CA rotation waits, after every member trusts
	// both CAs, for the request to let it go on (consumers to restart).
	EventCARotationHeld = "CARotationHeld"
	// EventCARotationContinued: a held CA rotation goes on.
	EventCARotationContinued = "CARotationContinued"
	// EventCARotationCompleted: every member and consumer holds a
	// certificate of the new CA and trusts it alone.
	EventCARotationCompleted = "CARotationCompleted"
	// EventCARotationRefused (Warning): a CA rotation request cannot be
	// carried out; the message says why.
	EventCARotationRefused = "CARotationRefused"
	// EventRecoveryRequestRefused (Warning): a quorum-loss recovery
	// request cannot be carried out; the message says why.
	EventRecoveryRequestRefused = "RecoveryRequestRefused"

	// Failures and what the hub does about them.

	// EventZoneFailed (Warning): a member cluster, or a zone in it, is
	// judged failed (rule 8); its members move after the grace period.
	EventZoneFailed = "ZoneFailed"
	// EventZoneReturned: a cluster or zone judged failed is alive again.
	EventZoneReturned = "ZoneReturned"
	// EventEvacuating (Warning): a member starts moving out of a failure
	// domain that failed (or was cordoned), with the evidence.
	EventEvacuating = "Evacuating"
	// EventMemberReplaced: a member runs again as a new incarnation (new
	// etcd ID, new volume) under the same name, with why it was replaced
	// and the evidence recorded when the replacement began.
	EventMemberReplaced = "MemberReplaced"
	// EventMemberRejoinRestart: a member that answers but has heard no
	// leader for a while, although the ring has one, is restarted in
	// place (same incarnation, same data): after a network partition
	// heals, etcd's peer streams can stay on connections that the cut
	// left half-open until TCP's retransmission backoff ends (up to
	// minutes); a restart opens new ones (AnnotationRestart).
	EventMemberRejoinRestart = "MemberRejoinRestart"
	// EventMemberStartGivenUp (Warning): an Add or Replace whose new
	// incarnation could not start where it was placed ended without it;
	// the member is placed again elsewhere.
	EventMemberStartGivenUp = "MemberStartGivenUp"
	// EventMemberRollGaveWay (Warning): a rolled member's pod stayed
	// Pending in its member cluster for the member grace while another
	// member runs the same spec: the spec starts, that cluster does not
	// start it. The roll ends, and the member is moved out of that
	// cluster by the placement (placement reason MemberNotStarting)
	// instead of holding every later roll of the ring.
	EventMemberRollGaveWay = "MemberRollGaveWay"
	// EventVolumesRetained (Warning): objects left behind were swept but
	// their volumes kept, whatever spec.storage.volumeReclaimPolicy says.
	EventVolumesRetained = "VolumesRetained"
	// EventAlarmRaised (Warning): etcd raised an alarm (NOSPACE, CORRUPT)
	// on a member (the same string as the alarm conditions' reason).
	EventAlarmRaised = ReasonAlarmRaised
	// EventAlarmCleared: an alarm is no longer raised.
	EventAlarmCleared = "AlarmCleared"

	// Consumers (spec.clients) and etcd authentication.

	// EventClientCertificateIssued: a consumer's client certificate was
	// issued (or reissued) into its Secret.
	EventClientCertificateIssued = "ClientCertificateIssued"
	// EventClientAccessRevoked: the etcd user of a consumer no longer in
	// spec.clients was deleted.
	EventClientAccessRevoked = "ClientAccessRevoked"
	// EventEtcdAuthEnabled: etcd authentication was turned on.
	EventEtcdAuthEnabled = "EtcdAuthEnabled"
	// EventEtcdAuthDisabled (Warning): etcd authentication was turned off.
	EventEtcdAuthDisabled = "EtcdAuthDisabled"
	// EventClientSecretLeft: a removed consumer's Secret in the hub
	// cluster is left in place; delete it by hand.
	EventClientSecretLeft = "ClientSecretLeft"
	// EventClientSecretDeleted: a removed consumer's Secret was deleted.
	EventClientSecretDeleted = "ClientSecretDeleted"

	// Revocation (spec.tls.revokedCertificates).

	// EventRevocationListSigned: the hub signed a revocation list of other
	// serials (or with another CA) for the members' Secrets.
	EventRevocationListSigned = "RevocationListSigned"
	// EventRevocationListCurrent: every member runs with the current
	// revocation list.
	EventRevocationListCurrent = "RevocationListCurrent"
	// EventRevocationListFailed (Warning): no revocation list can be
	// signed (the CA's key is not held, or the CA may not sign lists).
	EventRevocationListFailed = "RevocationListFailed"

	// Backups and restores.

	// EventBackupSucceeded: a snapshot was stored (the same string as
	// BackupReasonSucceeded).
	EventBackupSucceeded = BackupReasonSucceeded
	// EventBackupFailed (Warning): a backup failed; the message starts
	// with the BackupHealthy reason.
	EventBackupFailed = "BackupFailed"
	// EventBackupPruneFailed (Warning): a snapshot was stored but
	// retention could not be applied.
	EventBackupPruneFailed = "BackupPruneFailed"
	// EventSnapshotVerified: the snapshot to restore was found and checked.
	EventSnapshotVerified = "SnapshotVerified"
	// EventSnapshotRefused (Warning): the snapshot to restore cannot be
	// restored; the message starts with the SnapshotVerified reason.
	EventSnapshotRefused = "SnapshotRefused"
)

// Events the hub records on its gossip Secret (etcdfed-gossip in the
// hub's namespace): member clusters' gossip identities and the key
// rotation that follows a cluster's removal (hub/spokes).
const (
	// EventGossipIdentityIssued: a member cluster got a new gossip
	// identity (its first, or one replacing a copy that no longer matched
	// the hub's table).
	EventGossipIdentityIssued = "GossipIdentityIssued"
	// EventGossipIdentityRevoked: a member cluster is no longer registered;
	// its identity left the table every spoke checks names against, and a
	// key rotation is due.
	EventGossipIdentityRevoked = "GossipIdentityRevoked"
	// EventGossipKeyRotationStarted: the hub's Secret accepts a new key
	// beside the old one (phase Accepting).
	EventGossipKeyRotationStarted = "GossipKeyRotationStarted"
	// EventGossipKeyRotationSwitched: every spoke accepts the new key;
	// it now encrypts, the old one is still accepted (phase Switching).
	EventGossipKeyRotationSwitched = "GossipKeyRotationSwitched"
	// EventGossipKeyRotationCompleted: every spoke encrypts with the new
	// key; the old one is dropped.
	EventGossipKeyRotationCompleted = "GossipKeyRotationCompleted"
)

// EventKubeconfigRefused (Warning) is recorded by the hub on a member
// cluster's kubeconfig Secret that it refuses to use (an unsafe
// kubeconfig); the message says what to change.
const EventKubeconfigRefused = "KubeconfigRefused"
