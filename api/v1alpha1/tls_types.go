package v1alpha1

// TLSSpec configures peer and client TLS, and etcd's authentication of
// clients by their certificates (auth).
// +kubebuilder:validation:XValidation:rule="!has(self.revokedCertificates) || size(self.revokedCertificates) == 0 || !has(self.mode) || self.mode != 'Disabled'",message="tls.revokedCertificates needs TLS: a ring with tls.mode Disabled asks no client for a certificate"
type TLSSpec struct {
	// mode is Enabled (default) or Disabled. Immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tls.mode is immutable: switching TLS on a running cluster is not supported"
	Mode TLSMode `json:"mode,omitempty"`

	// caSecretName is a Secret in the EtcdCluster's namespace with tls.crt
	// and tls.key of a CA to issue member and client certificates from.
	// Default: the hub generates a CA in the Secret <name>-ca. Fixed at
	// creation: switching CAs at once would make members distrust each
	// other. The generated CA is rotated in place with `etcdfed rotate-ca`.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CASecretName string `json:"caSecretName,omitempty"`

	// peerSkipClientSANVerification turns off etcd's check that a peer's
	// source IP is in its certificate. Needed when peer connections pass NAT
	// or a load balancer, and on loopback.
	// +optional
	PeerSkipClientSANVerification bool `json:"peerSkipClientSANVerification,omitempty"`

	// auth is etcd's authentication: Enabled (default) or Disabled. When
	// enabled, the user of every request is its client certificate's
	// common name: the hub's (etcdfed-hub) and root are root, each
	// spec.clients consumer has the role it declares, and any other
	// certificate of the ring's CA reads and writes nothing. The hub
	// creates the users and roles first and turns authentication on
	// after, so consumers declared in spec.clients keep working. Disabled
	// turns it off again: every certificate of the CA is root on the data.
	// +optional
	Auth AuthMode `json:"auth,omitempty"`

	// revokedCertificates are serial numbers of certificates of the ring's
	// CA that etcd refuses as clients: lowercase hexadecimal without
	// leading zeros or colons, as `etcdfed client-cert` prints them
	// (`openssl x509 -noout -serial` prints the same digits in upper
	// case; `etcdfed client-cert revoke --cert FILE` adds one from a
	// certificate). The hub signs a revocation list of them with the
	// ring's CA, writes it into every member's Secret, and every member
	// runs etcd with --client-crl-file; etcd checks it on every new
	// client connection. A connection opened before a serial is listed
	// stays open until it closes. Removing a serial admits its
	// certificate again. Meant for root certificates (the hub's,
	// `etcdfed client-cert`'s) that no etcd user can be taken from; a
	// spec.clients entry is revoked by removing it. At most 512.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:items:MaxLength=40
	// +kubebuilder:validation:items:Pattern=`^[1-9a-f][0-9a-f]*$`
	RevokedCertificates []string `json:"revokedCertificates,omitempty"`
}

// AuthMode turns etcd's authentication on or off.
// +kubebuilder:validation:Enum=Enabled;Disabled
type AuthMode string

const (
	// AuthEnabled (default): etcd authentication with per-consumer roles.
	AuthEnabled AuthMode = "Enabled"
	// AuthDisabled: no etcd authentication.
	AuthDisabled AuthMode = "Disabled"
)

// AuthOn reports whether etcd authentication is wanted on a ring whose TLS
// is on (it needs client certificates).
func (t TLSSpec) AuthOn() bool { return t.Mode.Enabled() && t.Auth != AuthDisabled }
