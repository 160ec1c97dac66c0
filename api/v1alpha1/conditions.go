package v1alpha1

// Condition types of EtcdCluster.
const (
	// ConditionAvailable: etcd has a quorum and serves reads and writes.
	ConditionAvailable = "Available"
	// ConditionAllMembersReady: every desired member is in etcd, started and
	// healthy.
	ConditionAllMembersReady = "AllMembersReady"
	// ConditionProgressing: an operation is under way (a membership change,
	// a placement move, or a member's roll onto a changed spec).
	ConditionProgressing = "Progressing"
	// ConditionDegraded: something needs attention (a member unhealthy, a
	// member cluster unreachable, a spec that cannot be placed).
	ConditionDegraded = "Degraded"
	// ConditionFailureTolerant: today's placement survives the loss of any
	// one zone with quorum.
	ConditionFailureTolerant = "FailureTolerant"
	// ConditionSpokeVersions: every spoke of the ring's member clusters
	// runs a version the hub supports beside its own (the spoke's
	// EtcdSpoke status.version): the hub's minor version or one minor
	// older, of the same major; a spoke newer than the hub is not
	// supported (upgrade the hub first). Not set until a spoke reports its
	// version.
	ConditionSpokeVersions = "SpokeVersions"
)

// Reasons of EtcdCluster's SpokeVersions condition.
const (
	// ReasonSpokeVersionsSupported (True): every reporting spoke is within
	// the supported skew.
	ReasonSpokeVersionsSupported = "SpokeVersionsSupported"
	// ReasonSpokeVersionSkewed (False): at least one spoke is outside it;
	// the message names each cluster, its version and what to upgrade.
	// The hub records an event of the same reason when this begins.
	ReasonSpokeVersionSkewed = "SpokeVersionSkewed"
	// ReasonSpokeVersionUnknown (Unknown): a spoke or the hub runs a
	// development build (not vMAJOR.MINOR.PATCH) that differs from the
	// other, so the skew cannot be judged.
	ReasonSpokeVersionUnknown = "SpokeVersionUnknown"
)

// Condition types of EtcdMember.
const (
	// ConditionStorageReady: the data volume of the current incarnation is
	// bound.
	ConditionStorageReady = "StorageReady"
	// ConditionExposed: the member's address and URLs are known.
	ConditionExposed = "Exposed"
	// ConditionPodReady: the member's pod is running and ready.
	ConditionPodReady = "PodReady"
	// ConditionMemberHealthy: the member's etcd answers and has a leader.
	ConditionMemberHealthy = "MemberHealthy"
	// ConditionPeerConnections: what the member's own etcd log says about
	// its connections to its peers. While the member is not ready the
	// spoke reads a bounded tail of the log (pods/log) now and then; False
	// names the cause and the fix.
	ConditionPeerConnections = "PeerConnections"
)

// Reasons of EtcdMember's PeerConnections condition. The spoke sets them;
// the hub names the False ones in EtcdCluster's Degraded and Progressing
// conditions (Degraded's reason is then the first of them). Symptoms,
// causes and fixes: docs/troubleshooting.md.
const (
	// ReasonPeerCertificateUntrusted (False): etcd and a peer do not trust
	// each other's certificate (signed by a CA the other does not trust, or
	// expired): the members' certificates come from different CAs.
	ReasonPeerCertificateUntrusted = "PeerCertificateUntrusted"
	// ReasonPeerCertificateNameMismatch (False): etcd rejects peers whose
	// client certificate does not name the address they connect from
	// (NAT, load balancers, or pods sharing one source address), or a
	// peer's serving certificate does not name the host dialled.
	ReasonPeerCertificateNameMismatch = "PeerCertificateNameMismatch"
	// ReasonMemberRemoved (False): etcd stopped because its peers told it
	// that its ID was removed from the cluster: the data of a replaced
	// incarnation, or of a member dropped by a quorum-loss recovery. It
	// must never run on that data again (fencing).
	ReasonMemberRemoved = "MemberRemoved"
	// ReasonJoinedAsAnotherMember (False): a member started to join runs
	// under another member's ID: etcd took the ID that its peer URL had in
	// the member list of the first peer that answered, a peer that had not
	// yet seen that member removed. Its peers refuse it for good; the hub
	// removes the learner added for it and places the member again.
	ReasonJoinedAsAnotherMember = "JoinedAsAnotherMember"
	// ReasonClusterIDMismatch (False): a peer belongs to another etcd
	// cluster (data of another cluster, or two rings sharing names).
	ReasonClusterIDMismatch = "ClusterIDMismatch"
	// ReasonPeerNameUnresolved (False): etcd cannot resolve a peer's DNS
	// name.
	ReasonPeerNameUnresolved = "PeerNameUnresolved"
	// ReasonNoPeerErrors (True): the last read of the log shows none of the
	// causes above.
	ReasonNoPeerErrors = "NoPeerErrors"
	// ReasonPeersReady (True): the member is ready, so it reaches a quorum
	// of its peers; its log is not read.
	ReasonPeersReady = "MemberReady"
	// ReasonEtcdLogUnavailable (Unknown): the log could not be read; the
	// message says why.
	ReasonEtcdLogUnavailable = "LogUnavailable"
)

// PeerConnectionProblems are the False reasons of PeerConnections, most
// fundamental first (the order the hub reports them in).
var PeerConnectionProblems = []string{
	ReasonMemberRemoved,
	ReasonJoinedAsAnotherMember,
	ReasonClusterIDMismatch,
	ReasonPeerCertificateUntrusted,
	ReasonPeerCertificateNameMismatch,
	ReasonPeerNameUnresolved,
}

// Condition types of EtcdSpoke and EtcdDNSZone.
const (
	// ConditionReady: the spoke runs and its components are up.
	ConditionReady = "Ready"
	// ConditionServed: the zone's records are served by the spoke's DNS
	// server.
	ConditionServed = "Served"
)

// Labels set on objects etcdfed creates.
const (
	// LabelClusterName is the EtcdCluster's name.
	LabelClusterName = "etcdfed.dev/cluster"
	// LabelClusterNamespace is the EtcdCluster's namespace in the hub.
	LabelClusterNamespace = "etcdfed.dev/cluster-namespace"
	// LabelClusterUID is the EtcdCluster's UID.
	LabelClusterUID = "etcdfed.dev/cluster-uid"
	// LabelMember is the member name.
	LabelMember = "etcdfed.dev/member"
	// LabelMemberObject is the EtcdMember's name on the objects the spoke
	// writes for it (pod, Service, PVCs, disruption budget) when that name
	// is not the member's own (MemberObjectName): it maps them back to
	// their EtcdMember. Objects of an EtcdMember named after the member
	// alone (written before MemberObjectName) do not carry it.
	LabelMemberObject = "etcdfed.dev/member-object"
	// LabelIncarnation is the member incarnation.
	LabelIncarnation = "etcdfed.dev/incarnation"
	// LabelRetired is "true" on the volume of an incarnation no longer used.
	LabelRetired = "etcdfed.dev/retired"
	// LabelKeepVolumes is "true" on an EtcdMember the hub deletes while its
	// volumes must outlive it (an object left behind in a cluster that was
	// away, an old incarnation after a recovery): its spoke labels them
	// LabelKept.
	LabelKeepVolumes = "etcdfed.dev/keep-volumes"
	// LabelKept is "true" on a volume the spoke never deletes, whatever
	// the reclaim policy: it holds the data of an incarnation swept by the
	// hub. Only a human deletes it.
	LabelKept = "etcdfed.dev/kept"
	// LabelComponent says which part of a member an object is: data, pod,
	// peer (Service), tls.
	LabelComponent = "etcdfed.dev/component"
	// LabelManagedBy marks objects managed by etcdfed.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "etcdfed"
	// LabelRegisteredZonePrefix, on a member cluster's registration
	// Secret in the hub (etcdfed cluster join --label
	// zone.etcdfed.dev/eu-west-1a=), registers a zone of the cluster: the
	// label zone.etcdfed.dev/<zone> registers <zone>. A cluster with such
	// labels may report those zones only; a zone its spoke reports
	// outside them is refused (ReportRejected) and steers nothing.
	LabelRegisteredZonePrefix = "zone.etcdfed.dev/"
)
