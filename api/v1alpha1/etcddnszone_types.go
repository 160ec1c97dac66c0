package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DNSRecord is one RRset in zone-file presentation form.
type DNSRecord struct {
	// name is the absolute owner name, with a trailing dot.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name"`

	// type is the record type.
	// +required
	// +kubebuilder:validation:Enum=A;AAAA;CNAME;SRV;TXT;SOA;NS
	Type string `json:"type"`

	// ttl in seconds.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	TTL int32 `json:"ttl"`

	// data holds one RDATA per record of the set, in presentation format
	// (for example "10.0.0.1" or "0 0 2380 main-0.etcd.example.com.").
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	Data []string `json:"data"`
}

// EtcdDNSZoneSpec is the whole record set of one EtcdCluster's zone. The hub
// is its one writer.
type EtcdDNSZoneSpec struct {
	// cluster is the EtcdCluster whose records these are.
	// +required
	Cluster ClusterReference `json:"cluster"`

	// domain is the zone's origin, such as etcd.example.com.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Domain string `json:"domain"`

	// records of the zone, SOA and NS included.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	Records []DNSRecord `json:"records,omitempty"`
}

// EtcdDNSZoneStatus is written by the spoke that serves the zone.
type EtcdDNSZoneStatus struct {
	// conditions: Served.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the spoke serves.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// serial is the SOA serial served.
	// +optional
	Serial int64 `json:"serial,omitempty"`
}

// EtcdDNSZone is the record set of one EtcdCluster's DNS zone, served by
// the spoke's embedded DNS server in every member cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=etcdfed
// +kubebuilder:printcolumn:name="Domain",type=string,JSONPath=`.spec.domain`
// +kubebuilder:printcolumn:name="Serial",type=integer,JSONPath=`.status.serial`
// +kubebuilder:printcolumn:name="Served",type=string,JSONPath=`.status.conditions[?(@.type=="Served")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdDNSZone struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is written by the hub.
	// +required
	Spec EtcdDNSZoneSpec `json:"spec"`

	// status is written by the spoke.
	// +optional
	Status EtcdDNSZoneStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EtcdDNSZoneList is a list of EtcdDNSZone.
type EtcdDNSZoneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdDNSZone `json:"items"`
}

func init() {
	register(&EtcdDNSZone{}, &EtcdDNSZoneList{})
}

// GetConditions returns the status conditions.
func (z *EtcdDNSZone) GetConditions() []metav1.Condition { return z.Status.Conditions }

// SetConditions replaces the status conditions.
func (z *EtcdDNSZone) SetConditions(conds []metav1.Condition) { z.Status.Conditions = conds }
