package v1alpha1

// Reasons of the hub's tenancy rules (rule 14): what one EtcdCluster's
// spec may reach, decided by the hub's operator, not by the spec's author.
const (
	// ReasonDomainInUse (Available=False, Progressing=False, Degraded=True):
	// spec.dns.domain is served by another EtcdCluster, or lies inside its
	// domain or contains it; the message names that EtcdCluster. The hub
	// writes nothing for this one: a domain belongs to one ring.
	ReasonDomainInUse = "DomainInUse"
	// ReasonPolicyViolation (Available=False, Progressing=False,
	// Degraded=True): the spec asks for something the hub's tenancy policy
	// does not allow (an image, a priority class, a toleration); the
	// message names the field, the value and the rule. The hub writes
	// nothing for this EtcdCluster until the spec complies.
	ReasonPolicyViolation = "PolicyViolation"
	// ReasonReportRejected (Degraded=True): a member cluster reported a
	// status field the hub refused (a peer URL outside its member's DNS
	// name, an address that does not parse or is not unicast, ...); the
	// message names the cluster, the object and the field. The field is
	// treated as not reported: it reaches no other cluster, no DNS record
	// and no etcd endpoint.
	ReasonReportRejected = "ReportRejected"
	// BackupReasonForbidden (BackupHealthy=False) and
	// SnapshotReasonForbidden (SnapshotVerified=False): the store or the
	// snapshot's source is not allowed by the hub's tenancy policy (the
	// hub's own cloud identity or filesystem for a store without
	// credentials, a sourceCluster in another namespace). Nothing is read
	// or written.
	BackupReasonForbidden   = "ForbiddenByHubPolicy"
	SnapshotReasonForbidden = BackupReasonForbidden
)
