package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationRecover on an EtcdCluster asks the hub to recover the ring from
// a permanent loss of quorum. Its value is a RecoveryRequest in JSON; the
// etcdfed CLI (`etcdfed recover`) writes it. The hub acts on it only while
// it declares the quorum lost (Available=False, reason QuorumLost), only
// when the request was made after the quorum was lost (a request left over
// from an earlier loss is never taken for a new one), and only once (its
// uid is recorded in status.lastRecoveryRequest). A request dated in the
// future is refused. A new cluster is forced only once every voter that
// is not a survivor is known gone: its data lost, or confirmed fenced
// (AnnotationFenced).
const AnnotationRecover = "etcdfed.dev/recover"

// AnnotationFenced on an EtcdCluster confirms that members cannot serve
// any more: their etcd processes are stopped and kept from starting, or
// their member clusters are cut off for good (fenced). Its value is a
// FencingConfirmation in JSON, written by an operator, a fencing
// controller, or `etcdfed recover --confirm-fenced`. The hub forces a new
// cluster (quorum-loss recovery, requested or automatic) only when every
// voter that is not a survivor is confirmed fenced or its own cluster shows
// its data lost: an unreachable member may be alive and serving a majority
// the hub cannot see.
const AnnotationFenced = "etcdfed.dev/fenced"

// AnnotationRestart, on an EtcdMember, asks its spoke to restart the
// member's pod in place (the same incarnation on the same volume): its
// value is a token the hub chooses, copied onto the pod the spoke
// creates, and a pod that does not carry the member's token is replaced
// once. The hub sets it on a member that answers but has heard no
// leader for a while although the ring has one (EventMemberRejoinRestart):
// after a partition heals, etcd's peer streams can stay on half-open
// connections until TCP's retransmission backoff ends.
const AnnotationRestart = "etcdfed.dev/restart"

// FencingConfirmation is the value of AnnotationFenced.
// +kubebuilder:object:generate=false
type FencingConfirmation struct {
	// Members are the fenced members.
	Members []FencedMember `json:"members"`
	// ConfirmedAt is when the fencing was confirmed (the writer's clock).
	// A confirmation made before the quorum was lost counts for nothing.
	ConfirmedAt time.Time `json:"confirmedAt"`
	// By names who confirmed it (a person, a controller).
	By string `json:"by,omitempty"`
}

// FencedMember names one fenced member.
// +kubebuilder:object:generate=false
type FencedMember struct {
	// Name is the member's name.
	Name string `json:"name"`
	// ID is the member's etcd ID (hex) as status.members shows it; when
	// set, the confirmation holds only for that incarnation.
	ID string `json:"id,omitempty"`
}

// ParseFencingConfirmation reads AnnotationFenced's value.
func ParseFencingConfirmation(v string) (FencingConfirmation, error) {
	var f FencingConfirmation
	if err := json.Unmarshal([]byte(v), &f); err != nil {
		return f, fmt.Errorf("annotation %s: %w", AnnotationFenced, err)
	}
	if f.ConfirmedAt.IsZero() {
		return f, fmt.Errorf("annotation %s: confirmedAt is missing", AnnotationFenced)
	}
	if len(f.Members) == 0 {
		return f, fmt.Errorf("annotation %s: no members named", AnnotationFenced)
	}
	for _, m := range f.Members {
		if m.Name == "" {
			return f, fmt.Errorf("annotation %s: a member without a name", AnnotationFenced)
		}
	}
	return f, nil
}

// String renders the confirmation as the annotation's value.
func (f FencingConfirmation) String() string {
	b, err := json.Marshal(f)
	if err != nil {
		panic(err) // plain strings and a time always marshal
	}
	return string(b)
}

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
	// UID names this request: the hub acts on a request once and records
	// its uid (status.lastRecoveryRequest).
	UID string `json:"uid"`
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
	if r.UID == "" {
		return r, fmt.Errorf("annotation %s: uid is missing (made by an older etcdfed?): ask again with `etcdfed recover`", AnnotationRecover)
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

// QuorumLossStatus is what the hub knows of a ring whose majority of
// voters is not known to serve.
type QuorumLossStatus struct {
	// since is when etcd stopped answering with a leader.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// survivors are the members whose etcd answers its spoke with its data
	// (without a leader), freshest (highest raft index) first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=9
	Survivors []QuorumMember `json:"survivors,omitempty"`
	// gone are the voters known not to serve any more: their data lost (as
	// their own cluster shows), or confirmed fenced.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=9
	Gone []QuorumMember `json:"gone,omitempty"`
	// mustFence are the voters that neither answer nor are known gone:
	// unreachable (they may be alive and serving a majority the hub cannot
	// see), or their etcd does not answer in a cluster the hub sees. A new
	// cluster is forced only once each is fenced (stopped for good, or cut
	// off) and confirmed (annotation etcdfed.dev/fenced, or `etcdfed
	// recover --confirm-fenced`).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=9
	MustFence []QuorumMember `json:"mustFence,omitempty"`
}

// QuorumMember is one voter in QuorumLossStatus.
type QuorumMember struct {
	// name of the member.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// id is its etcd ID (hex).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ID string `json:"id,omitempty"`
	// cluster is the member cluster it lives in.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`
	// raftIndex is a survivor's raft index.
	// +optional
	RaftIndex int64 `json:"raftIndex,omitempty"`
	// why says what the hub knows of it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Why string `json:"why,omitempty"`
}

// RecoveryRequestStatus is a recovery request the hub consumed.
type RecoveryRequestStatus struct {
	// uid of the request.
	// +required
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
	// requestedAt is when it was made (the CLI's clock).
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
	// outcome is Accepted (a recovery began from it) or Refused.
	// +required
	Outcome RecoveryRequestOutcome `json:"outcome"`
	// message says why it was refused, or what began.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// at is when the hub consumed it (the hub's clock).
	// +optional
	At *metav1.Time `json:"at,omitempty"`
}

// RecoveryRequestOutcome is what became of a recovery request.
// +kubebuilder:validation:Enum=Accepted;Refused
type RecoveryRequestOutcome string

const (
	// RecoveryRequestAccepted: a recovery began from the request.
	RecoveryRequestAccepted RecoveryRequestOutcome = "Accepted"
	// RecoveryRequestRefused: the request will never be acted on (dated
	// in the future).
	RecoveryRequestRefused RecoveryRequestOutcome = "Refused"
)

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
	// survivor by itself, but only once every voter that is not a survivor
	// is known gone: its data lost, or confirmed fenced (annotation
	// etcdfed.dev/fenced, as a fencing controller writes it). An
	// unreachable member is never taken for a dead one.
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

// ReasonQuorumLost (EtcdCluster Available=False): etcd has not answered
// with a leader for failurePolicy.memberGracePeriod and the members that
// answer their spokes are fewer than a quorum. The message names the
// survivors (the freshest by raft index), the members known gone and those
// that must be fenced first (status.quorumLoss); `etcdfed recover
// --confirm-fenced` recovers once they are.
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
