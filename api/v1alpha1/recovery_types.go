package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"
)

// AnnotationRecover on an EtcdCluster asks the hub to recover the ring from
// a permanent loss of quorum. Its value is a RecoveryRequest in JSON; the
// etcdfed CLI (`etcdfed recover`) writes it. The hub acts on it only while
// it declares the quorum lost (Available=False, reason QuorumLost) and only
// when the request was made after the quorum was lost: a request left over
// from an earlier loss is never taken for a new one.
const AnnotationRecover = "etcdfed.dev/recover"

// RecoveryRequest is the value of AnnotationRecover.
// +kubebuilder:object:generate=false
type RecoveryRequest struct {
	// FromMember names the surviving member that restarts as a one-member
	// cluster from its own data (etcd --force-new-cluster). Empty: the
	// survivor with the highest raft index.
	FromMember string `json:"fromMember,omitempty"`
	// FromBackup recovers from a snapshot in spec.backup.store instead of
	// a survivor: "latest" (the newest snapshot of this EtcdCluster, any
	// etcd cluster ID) or an object key. A member in a visible member
	// cluster restarts as a new incarnation restored from it, founding a
	// new one-member etcd cluster (a new cluster ID and token); the others
	// come back as new incarnations joining it, under their names. Writes
	// after the snapshot are lost. Exclusive with FromMember.
	FromBackup string `json:"fromBackup,omitempty"`
	// AllowUnsigned lets FromBackup restore a snapshot whose sidecar has
	// no MAC the ring's snapshot key checks (one written before etcdfed
	// signed snapshots).
	AllowUnsigned bool `json:"allowUnsigned,omitempty"`
	// RequestedAt is when the request was made (the CLI's clock).
	RequestedAt time.Time `json:"requestedAt"`
}

// ParseRecoveryRequest reads AnnotationRecover's value.
func ParseRecoveryRequest(v string) (RecoveryRequest, error) {
	var r RecoveryRequest
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return r, fmt.Errorf("annotation %s: %w", AnnotationRecover, err)
	}
	if r.RequestedAt.IsZero() {
		return r, fmt.Errorf("annotation %s: requestedAt is missing", AnnotationRecover)
	}
	if r.FromMember != "" && r.FromBackup != "" {
		return r, fmt.Errorf("annotation %s: fromMember and fromBackup are exclusive", AnnotationRecover)
	}
	return r, nil
}

// String renders the request as the annotation's value.
func (r RecoveryRequest) String() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // plain strings and a time always marshal
	}
	return string(b)
}

// QuorumLossRecovery says whether the hub recovers a ring that lost its
// quorum by itself.
// +kubebuilder:validation:Enum=Manual;Automatic
type QuorumLossRecovery string

const (
	// QuorumLossRecoveryManual (default): the hub declares the loss
	// (Available=False, reason QuorumLost) and waits for `etcdfed recover`.
	QuorumLossRecoveryManual QuorumLossRecovery = "Manual"
	// QuorumLossRecoveryAutomatic: once the loss is declared and has lasted
	// failurePolicy.memberGracePeriod, the hub recovers from the freshest
	// survivor by itself.
	QuorumLossRecoveryAutomatic QuorumLossRecovery = "Automatic"
)

// OperationRecover restarts a surviving member as a one-member cluster
// from its own data (etcd --force-new-cluster) after the ring lost its
// quorum. The members that were gone are then added back one at a time,
// as learners under their names, with new incarnations (Add).
const OperationRecover OperationType = "Recover"

// RecoveryFromBackup is the reason of a Recover operation from a backup
// (RecoveryRequest.FromBackup).
const RecoveryFromBackup = "FromBackup"

// ReasonQuorumLost (EtcdCluster Available=False): a majority of the voters
// is gone (their clusters failed, or their etcd does not answer) and the
// rest cannot form a quorum. The message names the gone members and the
// freshest survivor by raft index; `etcdfed recover` recovers from it.
const ReasonQuorumLost = "QuorumLost"

// Reasons of EtcdMember's MemberHealthy condition that the hub reads to
// find the survivors of a ring without quorum: a member whose etcd answers
// its spoke (with or without a leader) still holds its data.
const (
	// ReasonMemberHealthy (MemberHealthy=True): etcd answers and has a
	// leader.
	ReasonMemberHealthy = "Healthy"
	// ReasonMemberNoLeader (MemberHealthy=False): etcd answers but sees no
	// leader.
	ReasonMemberNoLeader = "NoLeader"
	// ReasonMemberAlarm (MemberHealthy=False): etcd answers with errors or
	// alarms; without quorum it answers "etcdserver: no leader" this way.
	ReasonMemberAlarm = "Alarm"
)
