package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of spec.defragmentation, resolved in code. They are OpenShift's
// etcd operator's: a member is defragmented when at least 45% of its
// database file is free pages and that is at least 100 MB.
const (
	DefaultDefragMinFragmentedPercent int32 = 45
	DefaultDefragMinReclaimable             = "100Mi"
)

// DefragmentationSpec says when the hub defragments a member's database.
// etcd keeps the pages freed by compaction inside its database file
// (dbSize in status.members stays, dbSizeInUse drops); defragmentation
// rewrites the file without them. The member does not serve while it is
// defragmented, so the hub does one member at a time, only while every
// member is a ready voter, followers first and the leader last after
// moving leadership away, as an operation (status.operation, type Defrag)
// like a membership change.
type DefragmentationSpec struct {
	// automatic lets the hub defragment a member whose database is
	// fragmented beyond both thresholds below. Default true. A NOSPACE
	// alarm is recovered (compaction as far as noSpaceCompaction allows,
	// defragmentation, alarm disarm) even when this is false.
	// +optional
	Automatic *bool `json:"automatic,omitempty"`

	// minFragmentedPercent is the share of the database file, in percent,
	// that must be free pages ((dbSize - dbSizeInUse) / dbSize) before a
	// member is defragmented: 1 to 99. Default 45.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	MinFragmentedPercent *int32 `json:"minFragmentedPercent,omitempty"`

	// minReclaimable is how much the database file must shrink by at least
	// (dbSize - dbSizeInUse) before a member is defragmented: 1Mi to
	// 100Gi. Default 100Mi. Both thresholds must be reached.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0 && quantity(string(self)).compareTo(quantity('100Gi')) <= 0",message="minReclaimable must be between 1Mi and 100Gi"
	MinReclaimable *resource.Quantity `json:"minReclaimable,omitempty"`

	// schedule also defragments on a schedule, in the cron syntax of
	// spec.backup.schedule (UTC, such as "0 3 * * sun", or "@weekly"), every
	// member whose file has at least 1Mi and 5% of free pages, whatever the
	// thresholds above, one member at a time like an automatic
	// defragmentation. A run missed (hub down, or the ring not ready) is
	// done as soon as possible, once. Unset: no scheduled defragmentation.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches('^@every ([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || self.matches('^ *(([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]*)?(,([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]*)?)*) +(([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]*)?(,([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]*)?)*) +(([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]*)?(,([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]*)?)*) +(([*?]|(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?(,([*?]|(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?)*) +(([*?]|([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]*)?(,([*?]|([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]*)?)*) *$')",message="schedule must be cron syntax: five fields 'minute hour day-of-month month day-of-week' such as '0 */6 * * *' (minute 0-59, hour 0-23, day 1-31, month 1-12 or jan-dec, weekday 0-6 or sun-sat), or @hourly, @daily, @weekly, @monthly, @yearly, or '@every 30m'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^@every ([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.substring(7)) >= duration('1m')",message="@every needs an interval of at least 1m"
	Schedule string `json:"schedule,omitempty"`

	// noSpaceCompaction is how far the hub may compact the key space when
	// it recovers a NOSPACE alarm (compaction, every member defragmented,
	// alarm disarmed). Compaction drops every revision of every key older
	// than the revision compacted to: reads and watches at those revisions
	// fail with "required revision has been compacted", and that history
	// cannot be brought back. Retention (the default) compacts no further
	// than spec.etcd's auto-compaction keeps anyway: with
	// autoCompactionMode revision, to the current revision minus
	// autoCompactionRetention; with periodic or no auto-compaction, the hub
	// compacts nothing and only defragments. When that cannot bring every
	// member's file under 90% of its quota, the alarm stays raised and the
	// NoSpaceAlarm condition (reason CompactionNeedsConsent) says to set
	// this field, delete keys, or raise spec.etcd.quotaBackendBytes.
	// CurrentRevision is consent to compact to the current revision, as
	// etcd's own NOSPACE recovery procedure does: all history is dropped,
	// the latest value of every key is kept.
	// +optional
	// +kubebuilder:validation:Enum=Retention;CurrentRevision
	NoSpaceCompaction NoSpaceCompaction `json:"noSpaceCompaction,omitempty"`
}

// NoSpaceCompaction is how far a NOSPACE recovery may compact
// (spec.defragmentation.noSpaceCompaction).
type NoSpaceCompaction string

const (
	// NoSpaceCompactionRetention: no further than spec.etcd's
	// auto-compaction retention (the default).
	NoSpaceCompactionRetention NoSpaceCompaction = "Retention"
	// NoSpaceCompactionCurrentRevision: to the current revision (consent
	// to drop all history).
	NoSpaceCompactionCurrentRevision NoSpaceCompaction = "CurrentRevision"
)

// DefragmentationStatus reports scheduled defragmentation.
type DefragmentationStatus struct {
	// lastScheduled is when the last scheduled run (spec.defragmentation.
	// schedule) finished: every member with free pages defragmented.
	// +optional
	LastScheduled *metav1.Time `json:"lastScheduled,omitempty"`

	// nextScheduled is when the next scheduled run is due.
	// +optional
	NextScheduled *metav1.Time `json:"nextScheduled,omitempty"`
}

// Alarm types etcd raises.
const (
	// AlarmNoSpace: a member's database reached --quota-backend-bytes; the
	// ring accepts only reads and deletes until the alarm is disarmed.
	AlarmNoSpace = "NOSPACE"
	// AlarmCorrupt: members' data disagree (hash check); the ring refuses
	// writes until a human repairs it.
	AlarmCorrupt = "CORRUPT"
)

// AlarmStatus is one alarm etcd has raised and not yet disarmed.
type AlarmStatus struct {
	// type is NOSPACE or CORRUPT.
	// +required
	// +kubebuilder:validation:MaxLength=16
	Type string `json:"type"`

	// member is the member the alarm is raised for, or its etcd ID in hex
	// when the hub has no member of that ID.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Member string `json:"member,omitempty"`

	// memberID is that member's etcd ID in hex.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	MemberID string `json:"memberID,omitempty"`

	// since is when the hub first saw the alarm, on its clock.
	// +required
	Since metav1.Time `json:"since"`

	// lastRecovery is when the hub last finished a recovery of this
	// NOSPACE alarm (compaction as far as spec.defragmentation.
	// noSpaceCompaction allows, every member defragmented) that could not
	// disarm it because the data kept is above the quota. The hub tries
	// again 10 minutes later; delete keys, raise
	// spec.etcd.quotaBackendBytes, or consent to compaction to the current
	// revision (spec.defragmentation.noSpaceCompaction: CurrentRevision).
	// +optional
	LastRecovery *metav1.Time `json:"lastRecovery,omitempty"`
}

// Condition types and reasons of EtcdCluster for alarms and maintenance.
const (
	// ConditionNoSpaceAlarm: True while etcd has a NOSPACE alarm raised
	// (writes refused). The message names the members and since when.
	ConditionNoSpaceAlarm = "NoSpaceAlarm"
	// ConditionCorruptAlarm: True while etcd has a CORRUPT alarm raised.
	ConditionCorruptAlarm = "CorruptAlarm"
	// ReasonAlarmRaised (True) and ReasonNoAlarm (False) of both alarm
	// conditions. While etcd does not answer, they keep their last value.
	ReasonAlarmRaised = "AlarmRaised"
	ReasonNoAlarm     = "NoAlarm"
	// ReasonCompactionNeedsConsent (NoSpaceAlarm True): the ring is out of
	// space, and a recovery that compacted no further than the configured
	// retention could not free enough. Set spec.defragmentation.
	// noSpaceCompaction: CurrentRevision (consent to drop history), delete
	// keys, or raise spec.etcd.quotaBackendBytes.
	ReasonCompactionNeedsConsent = "CompactionNeedsConsent"
)
