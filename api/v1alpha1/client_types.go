package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of a consumer's client Secret (spec.clients[]). The certificate keys
// are the kubernetes.io/tls layout plus the CA bundle, the names Cluster
// API's external etcd Secrets and most charts use; endpoints is the
// comma-separated list kube-apiserver's --etcd-servers and etcdctl's
// --endpoints take.
const (
	// ClientSecretKeyCA is the ring's CA certificate (--etcd-cafile,
	// etcdctl --cacert).
	ClientSecretKeyCA = "ca.crt"
	// ClientSecretKeyCert is the client certificate (--etcd-certfile,
	// etcdctl --cert).
	ClientSecretKeyCert = "tls.crt"
	// ClientSecretKeyKey is the client key (--etcd-keyfile, etcdctl --key).
	ClientSecretKeyKey = "tls.key"
	// ClientSecretKeyEndpoints is the members' client URLs, comma-separated
	// (--etcd-servers, etcdctl --endpoints).
	ClientSecretKeyEndpoints = "endpoints"
)

// LabelClient names the spec.clients[] entry a client Secret belongs to.
const LabelClient = "etcdfed.dev/client"

// ClientSpec declares one consumer of the ring (a kube-apiserver, Cluster
// API's external etcd, an application). The hub issues it a client
// certificate from the ring's CA and keeps a Secret with the certificate,
// its key, the CA and the endpoints in the cluster and namespace where the
// consumer runs, renewed before expiry.
// +kubebuilder:validation:XValidation:rule="!has(self.cluster) || size(self.cluster) == 0 || (has(self.namespace) && size(self.namespace) > 0)",message="namespace is required when cluster names a member cluster (the hub cannot guess where the consumer runs there)"
// +kubebuilder:validation:XValidation:rule="(has(self.commonName) && size(self.commonName) > 0 ? self.commonName : self.name) != 'root' && (has(self.commonName) && size(self.commonName) > 0 ? self.commonName : self.name) != 'etcdfed-hub'",message="the etcd user (commonName, default name) must not be root or etcdfed-hub: those are the hub's own; give the consumer role: Root instead"
// +kubebuilder:validation:XValidation:rule="!has(self.keyPrefix) || size(self.keyPrefix) == 0 || !has(self.role) || self.role != 'Root'",message="keyPrefix limits ReadWrite and ReadOnly; a Root consumer reaches every key"
type ClientSpec struct {
	// name identifies the consumer within this EtcdCluster. It is the
	// certificate's common name (the etcd user when etcd auth uses
	// certificate CNs) unless commonName is set.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// cluster is the member cluster (the name of its kubeconfig Secret on
	// the hub) where the consumer runs. Empty: the hub cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// namespace of the Secret. Default (hub cluster only): the
	// EtcdCluster's namespace. The hub must be allowed to write Secrets
	// there (docs/certificates.md, "Client credentials").
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// secretName of the Secret. Default: <etcdcluster>-<name>-etcd-client.
	// A Secret of that name that the hub did not write is never
	// overwritten.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	SecretName string `json:"secretName,omitempty"`

	// commonName of the client certificate. Default: name. It is the
	// consumer's etcd user (etcd takes the user of a request from its
	// client certificate's common name), so it is unique among
	// spec.clients, and neither root nor etcdfed-hub.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.:@]*[A-Za-z0-9])?$`
	CommonName string `json:"commonName,omitempty"`

	// role is what the consumer may do in etcd, enforced by etcd's
	// authentication (spec.tls.auth): ReadWrite (default) reads and writes
	// keys under keyPrefix, ReadOnly only reads them, Root may do
	// anything (every key, users and roles, maintenance). Removing the
	// entry deletes the consumer's etcd user at once: its certificate,
	// still valid until it expires, no longer reads or writes a key.
	// +optional
	Role ClientRole `json:"role,omitempty"`

	// keyPrefix limits ReadWrite and ReadOnly to the keys that start with
	// it, such as /registry/ for a kube-apiserver with that
	// --etcd-prefix. Default: every key.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	KeyPrefix string `json:"keyPrefix,omitempty"`

	// certificateLifetime is how long each client certificate the hub
	// issues is valid, from 1h to 8760h (a year). Default 168h (7 days).
	// The hub renews it when a third of it is left (for 7 days: 2 days 8
	// hours before it expires), so a consumer that re-reads its files
	// (etcd's client library does on every new connection) never holds an
	// expired one, and a certificate of a removed consumer dies soon.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h') && duration(self) <= duration('8760h')",message="certificateLifetime must be between 1h and 8760h"
	CertificateLifetime *metav1.Duration `json:"certificateLifetime,omitempty"`

	// caReload says when the consumer reads the CA bundle (ca.crt):
	// OnChange (default) when it re-reads the file whenever the Secret
	// changes, AtStart when it reads it only when it starts, as
	// kube-apiserver does with --etcd-cafile and as any program does that
	// builds its TLS configuration once with go.etcd.io/etcd/client/pkg's
	// transport.TLSInfo (both re-read the certificate and key on each new
	// connection). A CA rotation holds after its Trusting phase, once this
	// consumer's Secret holds both CAs, until you have restarted the
	// consumer and run `etcdfed rotate-ca NAME --continue`: restarted any
	// later, it would refuse the members' certificates of the new CA.
	// +optional
	CAReload CAReload `json:"caReload,omitempty"`
}

// ClientRole is what a consumer may do in etcd.
// +kubebuilder:validation:Enum=ReadWrite;ReadOnly;Root
type ClientRole string

const (
	// ClientRoleReadWrite (default): read and write keys under keyPrefix
	// (leases, watches and compaction included).
	ClientRoleReadWrite ClientRole = "ReadWrite"
	// ClientRoleReadOnly: read keys under keyPrefix; every write is
	// refused ("permission denied").
	ClientRoleReadOnly ClientRole = "ReadOnly"
	// ClientRoleRoot: etcd's root role: every key, users and roles,
	// maintenance.
	ClientRoleRoot ClientRole = "Root"
)

// DefaultClientCertificateLifetime is a client certificate's lifetime when
// spec.clients[].certificateLifetime is unset.
const DefaultClientCertificateLifetime = 7 * 24 * time.Hour

// CAReload is when a consumer reads its CA bundle.
// +kubebuilder:validation:Enum=OnChange;AtStart
type CAReload string

const (
	// CAReloadOnChange: the consumer re-reads ca.crt when it changes.
	CAReloadOnChange CAReload = "OnChange"
	// CAReloadAtStart: the consumer reads ca.crt only when it starts; a CA
	// rotation waits for it to be restarted (spec.clients[].caReload).
	CAReloadAtStart CAReload = "AtStart"
)

// ClientStatus is the state of one consumer's Secret.
type ClientStatus struct {
	// name of the spec.clients[] entry.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// cluster where the Secret is kept; empty for the hub cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// namespace of the Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// secretName of the Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// ready is true when the Secret holds a valid certificate of the
	// ring's current CA and the current endpoints.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// notAfter is when the certificate in the Secret expires. The hub
	// renews it when a third of its lifetime is left.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`

	// issuedAt is when the hub last issued the certificate.
	// +optional
	IssuedAt *metav1.Time `json:"issuedAt,omitempty"`

	// caHash identifies the CA bundle (ca.crt) and the issuer of the
	// certificate the Secret holds, as the hub last wrote them: the hub
	// moves a CA rotation on only once every consumer's Secret holds what
	// the phase needs.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CAHash string `json:"caHash,omitempty"`

	// message says what is wrong when ready is false.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ConditionClientsReady on an EtcdCluster with spec.clients: True when
// every consumer's Secret holds a valid certificate of the ring's CA and
// the current endpoints; False (reason ClientSecretFailed) naming the ones
// that do not. It gates nothing else the hub does.
const ConditionClientsReady = "ClientsReady"

// Reasons of the ClientsReady condition.
const (
	// ClientReasonReady (True): every client Secret is up to date.
	ClientReasonReady = "SecretsReady"
	// ClientReasonPending (Unknown): the ring has no CA or no endpoints
	// yet.
	ClientReasonPending = "Pending"
	// ClientReasonFailed (False): a Secret could not be written (cluster
	// not reachable, forbidden, a Secret of that name not the hub's).
	ClientReasonFailed = "ClientSecretFailed"
	// ClientReasonTLSDisabled (False): the ring runs without TLS, so
	// there is no certificate to give.
	ClientReasonTLSDisabled = "TLSDisabled"
	// ClientReasonAccessFailed (False): etcd's users and roles could not
	// be brought in line with spec.clients, or authentication not turned
	// on (etcd did not answer, or a user of that name exists that the hub
	// did not create).
	ClientReasonAccessFailed = "EtcdAccessFailed"
)

// Names of what the hub keeps in etcd's authentication.
const (
	// EtcdRootUser is etcd's root user (with the root role): etcd refuses
	// to enable authentication without it. A certificate with this common
	// name is root: the hub never issues one to a consumer.
	EtcdRootUser = "root"
	// EtcdHubUser is the hub's own user (the common name of its client
	// certificate), with the root role.
	EtcdHubUser = "etcdfed-hub"
	// EtcdClientRolePrefix prefixes the role of each spec.clients entry,
	// etcdfed-client-<name>: the hub manages the users that hold one, and
	// no other.
	EtcdClientRolePrefix = "etcdfed-client-"
	// EtcdMemberRole marks the etcd user of each member of the ring (its
	// certificate's common name, the member's name), which also holds the
	// root role: the member's preStop hook moves leadership off it with
	// MoveLeader, which etcd allows root alone. The hub manages the users
	// that hold it, and deletes one when its member leaves the ring.
	EtcdMemberRole = "etcdfed-member"
)
