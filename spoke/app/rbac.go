package app

// The spoke's permissions, generated into config/rbac/spoke/role.yaml (go
// generate ./config/rbac/spoke). Everything namespaced is limited to the
// ring namespace by a Role; nodes are read cluster-wide (zones, and
// whether a node is cordoned); TokenReviews and SubjectAccessReviews
// authenticate and authorize the callers of /metrics (internal/metricsserve).
//
// Pods, PVCs, Services, PodDisruptionBudgets: the member components;
// pods/log: a bounded tail of etcd's log while a member is not ready
// (spoke/etcdlog). Secrets: read the members' TLS Secrets and the gossip
// key; delete the hub's credential anchor etcdfed-hub-credential when its
// chain ends, and write the hub's sealed token into etcdfed-hub-sealed-token
// (update only: `cluster join` creates it) (spoke/credential).
// serviceaccounts/token on etcdfed-hub only: the spoke mints the hub's
// tokens, bound to the anchor, and seals them to the hub; the hub itself
// may not (issue 37). Leases: the liveness Lease and leader election. Events: both APIs
// (controller-runtime's recorder uses events.k8s.io).
// etcdmembers/finalizers: owner references with blockOwnerDeletion on
// pods, Services and PodDisruptionBudgets.
//
// +kubebuilder:rbac:groups="",namespace=etcdfed-system,resources=pods;persistentvolumeclaims;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=etcdfed-system,resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",namespace=etcdfed-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=etcdfed-system,resources=secrets,resourceNames=etcdfed-hub-credential,verbs=delete
// +kubebuilder:rbac:groups="",namespace=etcdfed-system,resources=secrets,resourceNames=etcdfed-hub-sealed-token,verbs=update
// +kubebuilder:rbac:groups="",namespace=etcdfed-system,resources=serviceaccounts/token,resourceNames=etcdfed-hub,verbs=create
// +kubebuilder:rbac:groups="",namespace=etcdfed-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=etcdfed-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=etcdfed-system,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=etcdfed.dev,namespace=etcdfed-system,resources=etcdmembers,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=etcdfed.dev,namespace=etcdfed-system,resources=etcdmembers/status,verbs=get;patch
// +kubebuilder:rbac:groups=etcdfed.dev,namespace=etcdfed-system,resources=etcdmembers/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcdfed.dev,namespace=etcdfed-system,resources=etcdspokes,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=etcdfed.dev,namespace=etcdfed-system,resources=etcdspokes/status,verbs=get;patch
// +kubebuilder:rbac:groups=etcdfed.dev,namespace=etcdfed-system,resources=etcddnszones,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcdfed.dev,namespace=etcdfed-system,resources=etcddnszones/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=policy,namespace=etcdfed-system,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,namespace=etcdfed-system,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
