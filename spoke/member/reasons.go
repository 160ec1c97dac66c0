package member

import etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"

// Condition reasons of EtcdMember, by condition type. Together with the type
// and status they are the contract with the hub. Reasons the hub acts on
// are defined in the API and aliased here, except ContainerFailing
// (PodReady=False: the etcd or prepare-data container cannot run, see
// containerFailing), which status.go uses from the API directly.
// PeerConnections' reasons are the API's (etcdfedv1.PeerConnectionProblems,
// ReasonPeersReady, ReasonNoPeerErrors, ReasonEtcdLogUnavailable), chosen
// by status.go and spoke/etcdlog.
const (
	// ReasonInvalidSpec (PodReady=False): the spec cannot be run; the
	// message says why. Nothing was created or deleted for this generation
	// and an existing pod is left as it was.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonRefusedByPolicy (PodReady=False): the spoke's own policy
	// (PodPolicy, the flags its member cluster's operator set) refuses the
	// member's pod settings; the message names each and the flag. As with
	// InvalidSpec nothing is created or deleted and an existing pod is
	// left as it was.
	ReasonRefusedByPolicy = "RefusedByPolicy"

	// ReasonBudgetChanged (event): the member's PodDisruptionBudget was
	// opened for the hub's one disruption grant, or closed again.
	ReasonBudgetChanged = "DisruptionBudgetChanged"

	// StorageReady.
	ReasonBound             = "Bound"             // True: the PVC is bound.
	ReasonVolumePending     = "Pending"           // False: the PVC waits for a volume (WaitForFirstConsumer binds when the pod is scheduled).
	ReasonVolumeTerminating = "VolumeTerminating" // False: the PVC is being deleted.
	ReasonVolumeConflict    = "VolumeConflict"    // False: a PVC of that name is not the member's.
	// False: the PVC the member ran on is gone or was replaced; the member
	// needs a new incarnation. The hub acts on it: defined in the API.
	ReasonVolumeLost = etcdfedv1.ReasonVolumeLost

	// Exposed.
	ReasonExposed                = "Exposed"                // True: address and URLs are known.
	ReasonWaitingForPodIP        = "WaitingForPodIP"        // False: PodIP exposure; the URLs are known, the address once the pod has an IP.
	ReasonWaitingForNodeIP       = "WaitingForNodeIP"       // False: NodePort exposure; the address is the pod's node IP.
	ReasonWaitingForNodePorts    = "WaitingForNodePorts"    // False: the NodePort Service has no node ports yet.
	ReasonWaitingForLoadBalancer = "WaitingForLoadBalancer" // False: the load balancer has no ingress address yet.
	ReasonServiceConflict        = "ServiceConflict"        // False: a Service of that name is not the member's.

	// PodReady.
	ReasonReady               = "Ready"               // True: etcd's /readyz passes.
	ReasonWaitingForBootstrap = "WaitingForBootstrap" // False: spec.bootstrap is unset; volume and exposure are prepared, no pod is created.
	ReasonTLSSecretMissing    = "TLSSecretMissing"    // False: the Secret spec.tls.secretName does not exist; no pod is created.
	ReasonTLSSecretInvalid    = "TLSSecretInvalid"    // False: the Secret lacks ca.crt, tls.crt or tls.key or they do not parse.
	ReasonTLSSecretNotCurrent = "TLSSecretNotCurrent" // False: during a CA rotation, the Secret does not hold the CA trust spec.tls.caHash names yet; the pod (a running one is kept) waits for it, since etcd reads its trusted CAs only when it starts.
	ReasonWaitingForStorage   = "WaitingForStorage"   // False: the data volume cannot be used (see StorageReady).
	ReasonWaitingForExposure  = "WaitingForExposure"  // False: the advertised ports or address are not known yet (see Exposed).
	ReasonBootstrapMismatch   = "BootstrapMismatch"   // False: bootstrap.initialCluster does not list the member with its advertised peer URL.
	ReasonBootstrapRefused    = "BootstrapRefused"    // False: initialClusterState new for a member that had an earlier incarnation would found a second cluster.
	ReasonPodConflict         = "PodConflict"         // False: a pod of that name is not the member's.
	ReasonPodCreated          = "PodCreated"          // False: the pod was just created.
	ReasonPodTerminating      = "PodTerminating"      // False: the pod is being deleted (an old incarnation, or a terminated pod being replaced).
	ReasonPodReplaced         = "PodReplaced"         // False: the hub changed the member spec (image, version, etcd flags, TLS, exposure, pod settings); the pod is deleted and recreated from it on the same volume.
	ReasonWaitingForDNS       = "WaitingForDNS"       // False: the wait-dns init container waits for the member's name to resolve to its address.
	ReasonPodNotReady         = "NotReady"            // False: etcd runs but /readyz fails (no quorum, or still starting).
	ReasonLearner             = "Learner"             // False: etcd runs as a learner, which is never ready for clients; it waits for promotion.
	ReasonPodTerminated       = "PodTerminated"       // False: the pod failed or completed and will not run again.
	// False: the pod is scheduled and runs its init containers; etcd
	// starts after them. Not PodPending: its cluster started the pod.
	ReasonPodInitializing = "PodInitializing"
	// False: the pod is not scheduled or its containers are not started.
	// The hub acts on it (a roll halts): defined in the API.
	ReasonPodPending = etcdfedv1.ReasonPodPending

	// MemberHealthy.
	ReasonHealthy     = etcdfedv1.ReasonMemberHealthy  // True: etcd answers and has a leader.
	ReasonNoPod       = "NoPod"                        // False: no running pod of the current incarnation.
	ReasonUnreachable = "Unreachable"                  // False: the status read failed.
	ReasonNoLeader    = etcdfedv1.ReasonMemberNoLeader // False: etcd answers but sees no leader.
	ReasonAlarm       = etcdfedv1.ReasonMemberAlarm    // False: etcd reports errors or alarms (NOSPACE, CORRUPT).
)
