package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RevocationStatus reports the revocation list of spec.tls.revokedCertificates:
// the list the hub signed and how many members run with it.
type RevocationStatus struct {
	// revoked is how many serial numbers the current list holds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revoked int32 `json:"revoked,omitempty"`

	// supersededPeers is how many of the revoked serials are member (peer)
	// certificates the hub replaced and that have not expired: a renewed
	// certificate, one of the CA a rotation retired, an earlier
	// incarnation's. Each is listed once the grace for the kubelet to copy
	// its replacement into the member's pod has passed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SupersededPeers int32 `json:"supersededPeers,omitempty"`

	// supersededHub is how many of the revoked serials are the hub's own
	// client certificates (etcd's root user) that it replaced (a renewal,
	// a new CA, a revoked one) and that have not expired: a stolen copy of
	// one is refused as the current one would be.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SupersededHub int32 `json:"supersededHub,omitempty"`

	// carried is how many of the revoked serials the hub carried from the
	// list the members held when it took the ring over (a hub rebuilt in a
	// new hub cluster): the old hub's superseded certificates and the
	// serials it listed, kept until a year after they were revoked or
	// until a CA rotation drops the CA that signed that list.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Carried int32 `json:"carried,omitempty"`

	// listNumber is the current list's CRL number: it goes up by one each
	// time the hub signs a list (a serial added or removed, a new signing
	// CA, a list near its nextUpdate).
	// +optional
	// +kubebuilder:validation:Minimum=0
	ListNumber int64 `json:"listNumber,omitempty"`

	// signedBy names the CA that signed the current list (subject and
	// serial).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	SignedBy string `json:"signedBy,omitempty"`

	// membersCurrent is how many of the ring's members run etcd with
	// --client-crl-file and --peer-crl-file (their object's spec.tls.revocationList and peerRevocationList, observed
	// by their spoke) on a Secret that holds the current list. The
	// kubelet copies a changed Secret into a running pod's volume within
	// its sync period (about a minute; the local environment's nodes
	// within 15 s), which the hub does not observe.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MembersCurrent int32 `json:"membersCurrent,omitempty"`

	// membersTotal is how many members the ring has.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MembersTotal int32 `json:"membersTotal,omitempty"`

	// updatedAt is when the hub last signed a list (listNumber).
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`

	// message says what is missing, when something is (members not yet
	// on the list, a CA that cannot sign lists).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RevocationListKey is the key of a member's certificate Secret that holds
// the ring's revocation list (DER), mounted beside ca.crt.
const RevocationListKey = "ca.crl"
