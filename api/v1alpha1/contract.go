package v1alpha1

import (
	"fmt"
	"strings"
)

// Condition reasons one component writes and another reads. The type and
// status of the condition are given with each; the hub acts on them, so
// they are defined once, here.
const (
	// ReasonVolumeLost (EtcdMember StorageReady=False, written by the
	// spoke): the volume of an incarnation that once existed is gone. The
	// hub replaces the member with a new incarnation.
	ReasonVolumeLost = "VolumeLost"
	// ReasonNoNodes (EtcdSpoke Ready=False, written by the spoke): the
	// member cluster has no nodes yet. The hub does not believe its zone
	// list and places nothing there.
	ReasonNoNodes = "NoNodes"
	// ReasonPodPending (EtcdMember PodReady=False, written by the spoke):
	// the member's pod is not scheduled, or its containers are not started
	// (an image not pulled yet). During a roll the hub waits on it and,
	// beyond failurePolicy.memberGracePeriod, halts the rollout: a pod that
	// cannot start is not a failed member, and its replacement could not
	// start either; unless another member runs the same spec, when the
	// roll gives way and the member moves to another member cluster
	// (EtcdClusterStatus.NotStarting).
	ReasonPodPending = "PodPending"
)

// The hub's credential chain in a member cluster (issue 37). `etcdfed
// cluster join` creates the Secret HubCredentialAnchor in the ring
// namespace, annotated with AnnotationCredentialNotAfter (RFC 3339), and
// mints the hub's first token bound to it (TokenRequest boundObjectRef).
// The spoke mints every later one, bound to the same Secret, and seals it
// to the hub's public key (HubSealedToken); the hub holds no right to mint
// a token, and the member cluster's admission policy (config/rbac/hub-member)
// refuses it any write to that Secret or to HubSealedToken. The spoke
// deletes the anchor once the time has passed, and with it every token of
// the chain stops authenticating. A stolen token lives its lifetime.
// `cluster join` again starts a new chain (a new Secret), which ends every
// token of the old one.
const (
	// HubCredentialAnchor is the Secret the hub's tokens are bound to.
	HubCredentialAnchor = "etcdfed-hub-credential"
	// AnnotationCredentialNotAfter is when the chain ends, on the anchor
	// (and, for the hub's own view, on its registration Secret).
	AnnotationCredentialNotAfter = "etcdfed.dev/credential-not-after"
	// AnnotationCredentialHub names the hub cluster whose join started the
	// chain (the UID of its kube-system namespace), on the anchor. A
	// member cluster answers one hub cluster: a join from another one is
	// refused unless it takes the member cluster over (`cluster join
	// --take-over`), which starts a new chain and so ends the other hub's
	// tokens.
	AnnotationCredentialHub = "etcdfed.dev/credential-hub"

	// AnnotationHubSealingKey is the hub's public sealing key (X25519,
	// base64; internal/tokenseal), on the anchor: `cluster join` copies it
	// there from the hub cluster, and the spoke seals the hub's tokens to
	// it. An anchor without it is of a join before sealing: the hub renews
	// its own token there until `cluster join` runs again.
	AnnotationHubSealingKey = "etcdfed.dev/hub-sealing-key"
	// AnnotationHubTokenLifetime is the lifetime of the hub's tokens the
	// spoke mints (a Go duration, `cluster join --token-lifetime`), on the
	// anchor.
	AnnotationHubTokenLifetime = "etcdfed.dev/token-lifetime"
	// HubSealedToken is the Secret, in the ring namespace, where the spoke
	// writes the hub's current token sealed to the hub's key (data
	// HubSealedTokenKey), with its issue and expiry times and the anchor's
	// UID in the clear (annotations below). `cluster join` creates it; the
	// spoke updates it; the member cluster's admission policy refuses the
	// hub any write of it.
	HubSealedToken = "etcdfed-hub-sealed-token"
	// HubSealedTokenKey holds the sealed token in HubSealedToken.
	HubSealedTokenKey = "sealed"
	// AnnotationSealedIssued and AnnotationSealedExpiry are the sealed
	// token's issue and expiry times (RFC 3339), on HubSealedToken.
	AnnotationSealedIssued = "etcdfed.dev/token-issued"
	AnnotationSealedExpiry = "etcdfed.dev/token-expiry"
	// AnnotationSealedAnchor is the UID of the anchor the sealed token is
	// bound to, on HubSealedToken.
	AnnotationSealedAnchor = "etcdfed.dev/token-anchor-uid"
	// AnnotationSealedKey is the public key the token was sealed to, on
	// HubSealedToken.
	AnnotationSealedKey = "etcdfed.dev/token-sealed-to"
)

// ConditionGossipHealthy (EtcdSpoke, written by the spoke) says whether the
// spoke's gossip view can witness another cluster's death for the hub
// (rule 8). False: the spoke abstains; the hub does not count its view as a
// vote either way, and names it in the EtcdClusters' Degraded condition.
const ConditionGossipHealthy = "GossipHealthy"

// Reasons of ConditionGossipHealthy.
const (
	// ReasonGossipHealthy (True): gossip runs and sees at least one peer
	// alive.
	ReasonGossipHealthy = "Healthy"
	// ReasonGossipNotRunning (False): gossip is disabled or did not start
	// (its key Secret missing or invalid, no node name): the view is not
	// reported.
	ReasonGossipNotRunning = "NotRunning"
	// ReasonGossipNeverJoined (False): gossip runs but has never reached a
	// peer since it started (seeds unreachable, a firewall, another key).
	ReasonGossipNeverJoined = "NeverJoined"
	// ReasonGossipNoPeerAlive (False): gossip reached peers before but sees
	// none alive now: from the inside, its own cut and every peer's death
	// look the same.
	ReasonGossipNoPeerAlive = "NoPeerAlive"
)

// Condition reasons of EtcdCluster, written by the hub and read by users and
// by the etcdfed CLI.
const (
	// ReasonQuorate (Available=True): etcd has a leader and answers.
	ReasonQuorate = "Quorate"
	// ReasonNoQuorum (Available=False): etcd does not answer with a leader.
	ReasonNoQuorum = "NoQuorum"
	// ReasonNotBootstrapped (Available=False, FailureTolerant=False): etcd
	// has not formed yet, or has no voting member.
	ReasonNotBootstrapped = "NotBootstrapped"
	// ReasonAllReady (AllMembersReady=True): every member is a ready voter.
	ReasonAllReady = "AllReady"
	// ReasonMembersNotReady (AllMembersReady=False): the message lists them.
	ReasonMembersNotReady = "MembersNotReady"
	// ReasonIdle (Progressing=False): no operation in flight and none due.
	ReasonIdle = "Idle"
	// ReasonWaiting (Progressing=False): an operation is due but waits for a
	// precondition; the message says which.
	ReasonWaiting = "Waiting"
	// ReasonWaitingForFleetLimit (Progressing=False): the ring's next
	// operation restarts, replaces or moves a member, and the hub's
	// fleet-wide limit on such operations in flight
	// (--max-fleet-disruptions) is reached; the message names the rings
	// that hold it. The ring tries again every few seconds.
	ReasonWaitingForFleetLimit = "WaitingForFleetLimit"
	// ReasonTakingOver (Progressing=True): a rebuilt hub takes over the
	// running ring of this namespace and name from the member clusters
	// (status.takeOver); nothing is founded meanwhile.
	ReasonTakingOver = "TakingOver"
	// ReasonTakeOverHeld (Progressing=False): a running ring of this
	// namespace and name was found in the member clusters, but the hub
	// may not take it over yet; the message says why. Nothing is founded,
	// written or changed meanwhile.
	ReasonTakeOverHeld = "TakeOverHeld"
	// ReasonAsExpected (Degraded=False): nothing needs attention.
	ReasonAsExpected = "AsExpected"
	// ReasonProblems (Degraded=True): the message lists what needs
	// attention.
	ReasonProblems = "Problems"
	// ReasonObserveFailed (Degraded=True): the hub could not read its own
	// cluster (the EtcdCluster's CA, the member cluster registry).
	ReasonObserveFailed = "ObserveFailed"
	// ReasonSurvivesZoneLoss (FailureTolerant=True).
	ReasonSurvivesZoneLoss = "SurvivesZoneLoss"
	// ReasonZoneLossLosesQuorum (FailureTolerant=False): the message says
	// which zone's loss would cost quorum.
	ReasonZoneLossLosesQuorum = "ZoneLossLosesQuorum"
)

// Enabled reports whether peer and client traffic use TLS: every mode but
// Disabled, the empty default included.
func (m TLSMode) Enabled() bool { return m != TLSDisabled }

// URLScheme is https when TLS is enabled, else http.
func (m TLSMode) URLScheme() string {
	if m.Enabled() {
		return "https"
	}
	return "http"
}

// MemberDNSName is a member's stable DNS name, <member>.<domain>, without a
// trailing dot.
func MemberDNSName(member, domain string) string {
	return member + "." + strings.TrimSuffix(domain, ".")
}

// AnnotationBreakBeforeMake, set to "true" on an EtcdCluster, moves its
// live members break before make, as etcdfed did before make-before-break
// moves: the old incarnation removed first, the ring without failure
// tolerance for the move. It exists to measure the difference beside a
// Move (TestScenarioMigrate); nothing else needs it.
const AnnotationBreakBeforeMake = "etcdfed.dev/break-before-make"

// IncarnationDNSName is the DNS name of an incarnation added beside the
// member's live one by a make-before-break Move, <member>-i<incarnation>.<domain>:
// its peers reach it under this name for its whole life (its peer URL and
// its advertised client URL), while clients keep the stable name, which
// points at it once the old incarnation is removed. The "-i" keeps it apart
// from every member name (<ring>-<ordinal>) of the domain's one ring.
func IncarnationDNSName(member string, incarnation int64, domain string) string {
	return fmt.Sprintf("%s-i%d.%s", member, incarnation, strings.TrimSuffix(domain, "."))
}

// MemberURL is <scheme>://<dnsName>:<port>, the form of every peer and
// client URL etcdfed advertises.
func MemberURL(mode TLSMode, dnsName string, port int32) string {
	return fmt.Sprintf("%s://%s:%d", mode.URLScheme(), dnsName, port)
}
