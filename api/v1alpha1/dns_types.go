package v1alpha1

// DNSSpec configures the per-member records.
type DNSSpec struct {
	// domain is the DNS zone of this etcd cluster. Member <name> is reachable
	// as <name>.<domain>, and SRV records under the domain let clients use
	// --discovery-srv. At least two labels. The hub's operator may limit
	// the domains a namespace can use (hub flag --allowed-domains).
	// Immutable: every client's endpoint list is built from it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="domain must be a lowercase DNS name such as etcd.example.com (letters, digits, '-' and '.')"
	// +kubebuilder:validation:XValidation:rule="self.contains('.')",message="domain must have at least two labels, such as etcd.example.com: a single-label domain (com, local) would hold every name under it and keep every other ring out"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="domain is immutable: clients' endpoint lists are built from it; create a new EtcdCluster to change it"
	Domain string `json:"domain"`

	// ttlSeconds is the TTL of every record, 1 to 3600. Default 30. A low TTL
	// lets clients follow a member that moved.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	TTLSeconds *int32 `json:"ttlSeconds,omitempty"`

	// rfc2136 also publishes the records to an external authoritative server
	// by dynamic update (RFC 2136) signed with TSIG.
	// +optional
	RFC2136 *RFC2136Spec `json:"rfc2136,omitempty"`
}

// TSIGAlgorithm names a TSIG HMAC algorithm.
// +kubebuilder:validation:Enum=hmac-sha256;hmac-sha512;hmac-sha1
type TSIGAlgorithm string

// RFC2136Spec points at an external DNS server that accepts signed updates.
type RFC2136Spec struct {
	// server is the host:port of the authoritative server.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=261
	Server string `json:"server"`

	// zone is the zone to update on that server; dns.domain must be in it.
	// Default: dns.domain.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Zone string `json:"zone,omitempty"`

	// tsigKeyName is the name of the TSIG key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TSIGKeyName string `json:"tsigKeyName"`

	// tsigSecretName is a Secret in the EtcdCluster's namespace whose key
	// "secret" holds the base64 TSIG secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TSIGSecretName string `json:"tsigSecretName"`

	// tsigAlgorithm defaults to hmac-sha256.
	// +optional
	TSIGAlgorithm TSIGAlgorithm `json:"tsigAlgorithm,omitempty"`
}
