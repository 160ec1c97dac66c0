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
)

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
	// LabelIncarnation is the member incarnation.
	LabelIncarnation = "etcdfed.dev/incarnation"
	// LabelRetired is "true" on the volume of an incarnation no longer used.
	LabelRetired = "etcdfed.dev/retired"
	// LabelComponent says which part of a member an object is: data, pod,
	// peer (Service), tls.
	LabelComponent = "etcdfed.dev/component"
	// LabelManagedBy marks objects managed by etcdfed.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "etcdfed"
)
