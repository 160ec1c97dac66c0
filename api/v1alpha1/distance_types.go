package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Distance between member clusters (rule 15): each spoke measures the round
// trip to every other spoke of the ring (memberlist's probes) and reports
// it in EtcdSpoke status.roundTrips; the hub keeps the matrix of the
// ring's member clusters in EtcdCluster status.roundTrips, and with
// spec.etcd.timing Auto chooses etcd's heartbeat interval and election
// timeout from the round trips between the voters' clusters
// (status.timing).

// Bounds of reported round trips.
const (
	// MaxRoundTripMicros is the largest round trip a spoke may report
	// (one minute); a probe that slow has timed out long before.
	MaxRoundTripMicros int64 = 60_000_000
	// MaxRoundTrips is how many peers a spoke may report round trips to.
	MaxRoundTrips = 128
	// MaxRoundTripMatrix is how many (from, to) entries the hub keeps.
	MaxRoundTripMatrix = 1024
)

// TimingMode says where etcd's heartbeat interval and election timeout come
// from.
// +kubebuilder:validation:Enum=Auto;Manual
type TimingMode string

const (
	// TimingAuto derives them from the round trips measured between the
	// voters' member clusters (status.roundTrips), following etcd's tuning
	// guide, never below etcd's defaults (100 and 1000 ms), which are also
	// what a ring at zero distance, or before any measurement, runs. The
	// default.
	TimingAuto TimingMode = "Auto"
	// TimingManual uses etcd's defaults (100 and 1000 ms) unless
	// heartbeatIntervalMillis or electionTimeoutMillis are given.
	TimingManual TimingMode = "Manual"
)

// TimingFloor says what the least values of timing Auto are.
// +kubebuilder:validation:Enum=EtcdDefaults;Disk
type TimingFloor string

const (
	// TimingFloorEtcdDefaults: never below etcd's defaults (100 and 1000
	// ms). The default.
	TimingFloorEtcdDefaults TimingFloor = "EtcdDefaults"
	// TimingFloorDisk: from the voters' measured WAL syncs and late
	// heartbeats (status.etcd.walFsync of their EtcdMembers).
	TimingFloorDisk TimingFloor = "Disk"
)

// DiskWindowSeconds is how far back a spoke's view of a member's WAL
// syncs reaches once the member has run that long (status.etcd.walFsync
// windowSeconds).
const DiskWindowSeconds = 600

// TimingSource says which rule produced status.timing.
type TimingSource string

const (
	// TimingSourceAuto: both values derived from the measured round trips.
	TimingSourceAuto TimingSource = "Auto"
	// TimingSourceManual: spec.etcd.timing is Manual; etcd's defaults
	// where no value is given.
	TimingSourceManual TimingSource = "Manual"
	// TimingSourceSpec: spec.etcd gives heartbeatIntervalMillis or
	// electionTimeoutMillis explicitly; the given values win, a missing
	// one is derived (Auto) or etcd's default (Manual).
	TimingSourceSpec TimingSource = "Spec"
)

// PeerRoundTrip is the round trip from the reporting spoke to one peer
// spoke, over the last probes of memberlist (UDP ping and ack).
type PeerRoundTrip struct {
	// cluster is the peer's member cluster name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// medianMicros is the median round trip in microseconds over the
	// window of samples.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=60000000
	MedianMicros int64 `json:"medianMicros"`

	// p99Micros is the 99th percentile round trip in microseconds over
	// the window of samples (with fewer than 100 samples, the largest).
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=60000000
	P99Micros int64 `json:"p99Micros"`

	// samples is how many probes the window held when these values were
	// published.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Samples int32 `json:"samples"`

	// observedAt is when these values were published. They are published
	// again only when they change enough to matter, so an old time with a
	// fresh spoke means the distance has not changed.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
}

// RoundTrip is one entry of the ring's round-trip matrix: from one member
// cluster's spoke to another's.
type RoundTrip struct {
	// from is the member cluster that measured.
	// +required
	// +kubebuilder:validation:MaxLength=253
	From string `json:"from"`

	// to is the member cluster measured.
	// +required
	// +kubebuilder:validation:MaxLength=253
	To string `json:"to"`

	// medianMicros is the median round trip in microseconds.
	// +required
	// +kubebuilder:validation:Minimum=0
	MedianMicros int64 `json:"medianMicros"`

	// p99Micros is the 99th percentile round trip in microseconds.
	// +required
	// +kubebuilder:validation:Minimum=0
	P99Micros int64 `json:"p99Micros"`

	// observedAt is when the hub recorded these values. The hub records
	// a new value only when it differs enough to matter (the median or
	// the p99 by more than a quarter, and by more than 10 ms and 200 ms
	// respectively; a move of the p99 alone only 5 minutes after the last
	// record), so the status does not move with a link's jitter.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
}

// TimingStatus is the heartbeat interval and election timeout the hub
// chose for etcd, and why.
type TimingStatus struct {
	// heartbeatIntervalMillis passed to every member (etcd
	// --heartbeat-interval).
	// +required
	HeartbeatIntervalMillis int32 `json:"heartbeatIntervalMillis"`

	// electionTimeoutMillis passed to every member (etcd
	// --election-timeout).
	// +required
	ElectionTimeoutMillis int32 `json:"electionTimeoutMillis"`

	// source is Auto (derived from the measured round trips), Manual
	// (etcd's defaults where no value is given) or Spec (a value given in
	// spec.etcd wins).
	// +required
	// +kubebuilder:validation:MaxLength=16
	Source TimingSource `json:"source"`

	// message says why, such as "max round trip between voters median
	// 40 ms, p99 42 ms (member-1 to member-3); ...".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// lateHeartbeatsAt is when the hub last saw a voter report heartbeats
	// it sent late as leader (timingFloor Disk; refreshed at most once a
	// minute while they are reported). The floor stays at etcd's defaults
	// for an hour after it: the roll that raised the floor restarts every
	// member, and with them their counts, and at etcd's defaults a
	// heartbeat counts as late only after a stall three times as long, so
	// what raised the floor is not seen again while it holds.
	// +optional
	LateHeartbeatsAt *metav1.Time `json:"lateHeartbeatsAt,omitempty"`
}
