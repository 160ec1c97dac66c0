package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationBackupRequested on an EtcdCluster asks the hub for one
// snapshot now, outside the schedule. Its value is any token (the etcdfed
// CLI writes a timestamp); the hub takes one snapshot per new value and
// records the value in status.backup.lastRequest, whether the snapshot
// succeeded or failed.
const AnnotationBackupRequested = "etcdfed.dev/backup-requested"

// Keys of the credentials Secret named by spec.backup.store.credentialsSecretName.
const (
	// BackupSecretAWSAccessKeyID and BackupSecretAWSSecretAccessKey are the
	// static credentials of an s3:// store; BackupSecretAWSSessionToken is
	// optional.
	BackupSecretAWSAccessKeyID     = "AWS_ACCESS_KEY_ID"
	BackupSecretAWSSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	BackupSecretAWSSessionToken    = "AWS_SESSION_TOKEN"
	// BackupSecretGCPServiceAccount is a Google service account key (JSON)
	// for a gs:// store.
	BackupSecretGCPServiceAccount = "service-account.json"
	// BackupSecretAzureAccount names the storage account of an azblob://
	// store; it needs BackupSecretAzureKey (shared key) or
	// BackupSecretAzureSASToken.
	BackupSecretAzureAccount  = "AZURE_STORAGE_ACCOUNT"
	BackupSecretAzureKey      = "AZURE_STORAGE_KEY"
	BackupSecretAzureSASToken = "AZURE_STORAGE_SAS_TOKEN"
)

// Defaults of spec.backup, resolved in code.
const (
	// DefaultBackupMaxCount is the number of snapshots kept when
	// spec.backup.retention sets neither maxCount nor maxAge.
	DefaultBackupMaxCount int32 = 7
	// DefaultBackupTimeout bounds one backup (stream, verify, upload).
	DefaultBackupTimeout = "15m"
	// DefaultS3Region is the region of an s3:// store when none is given.
	DefaultS3Region = "us-east-1"
)

// BackupSpec configures scheduled snapshots of the etcd cluster, written
// to an object store. The hub takes each snapshot from a healthy follower
// (the leader only when no follower is healthy), checks its sha256 and its
// bbolt structure and reads its revision before it counts, uploads it, then
// deletes the snapshots retention no longer keeps.
type BackupSpec struct {
	// schedule says when snapshots are taken, in cron syntax on the hub's
	// clock, in UTC: five fields (minute 0-59, hour 0-23, day of month 1-31,
	// month 1-12 or jan-dec, day of week 0-6 or sun-sat; each a value, a
	// range a-b, a list, * or ?, with an optional /step), such as
	// "0 */6 * * *"; or @hourly, @daily (@midnight), @weekly, @monthly,
	// @yearly (@annually), or "@every <duration>" of at least 1m, such as
	// "@every 30m". A first snapshot is taken as soon as backups are
	// configured and etcd has formed. Missed runs (hub down) are not caught
	// up one by one: one snapshot is taken as soon as possible.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$') || self.matches('^@every ([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || self.matches('^ *(([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]*)?(,([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]*)?)*) +(([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]*)?(,([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]*)?)*) +(([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]*)?(,([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]*)?)*) +(([*?]|(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?(,([*?]|(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?)*) +(([*?]|([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]*)?(,([*?]|([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]*)?)*) *$')",message="schedule must be cron syntax: five fields 'minute hour day-of-month month day-of-week' such as '0 */6 * * *' (minute 0-59, hour 0-23, day 1-31, month 1-12 or jan-dec, weekday 0-6 or sun-sat), or @hourly, @daily, @weekly, @monthly, @yearly, or '@every 30m'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^@every ([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.substring(7)) >= duration('1m')",message="@every needs an interval of at least 1m"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.findAll('[^ ]+').size() != 5 || !self.findAll('[^ ]+')[2].matches('^(([*?]|[0-9]+(-[0-9]+)?)(/[1-9][0-9]*)?)(,(([*?]|[0-9]+(-[0-9]+)?)(/[1-9][0-9]*)?))*$') || !self.findAll('[^ ]+')[3].matches('^(([*?]|([0-9]+|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-([0-9]+|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?)(,(([*?]|([0-9]+|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-([0-9]+|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?))*$') || !self.findAll('[^ ]+')[4].split(',').exists(i, i in ['*', '?', '*/1', '?/1']) || self.findAll('[^ ]+')[2].split(',').exists(i, i.startsWith('*') || i.startsWith('?')) || self.findAll('[^ ]+')[3].split(',').exists(i, i.startsWith('*') || i.startsWith('?')) || !self.findAll('[^ ]+')[2].split(',').all(i, int(i.split('/')[0].split('-')[0]) >= 31) || self.findAll('[^ ]+')[3].split(',').map(i, [(i.split('/')[0].split('-')[0].lowerAscii() in {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12} ? {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12}[i.split('/')[0].split('-')[0].lowerAscii()] : int(i.split('/')[0].split('-')[0])), (i.split('/')[0].contains('-') ? (i.split('/')[0].split('-')[1].lowerAscii() in {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12} ? {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12}[i.split('/')[0].split('-')[1].lowerAscii()] : int(i.split('/')[0].split('-')[1])) : (i.contains('/') ? 12 : (i.split('/')[0].split('-')[0].lowerAscii() in {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12} ? {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12}[i.split('/')[0].split('-')[0].lowerAscii()] : int(i.split('/')[0].split('-')[0])))), (i.contains('/') ? int(i.split('/')[1]) : 1)]).exists(t, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].exists(k, t[0] + k * t[2] <= t[1] && !(t[0] + k * t[2] in [2, 4, 6, 9, 11])))",message="schedule never fires: none of the months it names has a 31st, and its earliest day of month is the 31st (such as 0 0 31 2 * or 0 0 31 4,6,9,11 *); with a day of week as well (0 0 31 2 mon) it fires on that day"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.findAll('[^ ]+').size() != 5 || !self.findAll('[^ ]+')[2].matches('^(([*?]|[0-9]+(-[0-9]+)?)(/[1-9][0-9]*)?)(,(([*?]|[0-9]+(-[0-9]+)?)(/[1-9][0-9]*)?))*$') || !self.findAll('[^ ]+')[3].matches('^(([*?]|([0-9]+|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-([0-9]+|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?)(,(([*?]|([0-9]+|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-([0-9]+|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]*)?))*$') || !self.findAll('[^ ]+')[4].split(',').exists(i, i in ['*', '?', '*/1', '?/1']) || self.findAll('[^ ]+')[2].split(',').exists(i, i.startsWith('*') || i.startsWith('?')) || self.findAll('[^ ]+')[3].split(',').exists(i, i.startsWith('*') || i.startsWith('?')) || !self.findAll('[^ ]+')[2].split(',').all(i, int(i.split('/')[0].split('-')[0]) >= 30) || !self.findAll('[^ ]+')[2].split(',').exists(i, int(i.split('/')[0].split('-')[0]) == 30) || self.findAll('[^ ]+')[3].split(',').map(i, [(i.split('/')[0].split('-')[0].lowerAscii() in {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12} ? {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12}[i.split('/')[0].split('-')[0].lowerAscii()] : int(i.split('/')[0].split('-')[0])), (i.split('/')[0].contains('-') ? (i.split('/')[0].split('-')[1].lowerAscii() in {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12} ? {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12}[i.split('/')[0].split('-')[1].lowerAscii()] : int(i.split('/')[0].split('-')[1])) : (i.contains('/') ? 12 : (i.split('/')[0].split('-')[0].lowerAscii() in {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12} ? {'jan': 1, 'feb': 2, 'mar': 3, 'apr': 4, 'may': 5, 'jun': 6, 'jul': 7, 'aug': 8, 'sep': 9, 'oct': 10, 'nov': 11, 'dec': 12}[i.split('/')[0].split('-')[0].lowerAscii()] : int(i.split('/')[0].split('-')[0])))), (i.contains('/') ? int(i.split('/')[1]) : 1)]).exists(t, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].exists(k, t[0] + k * t[2] <= t[1] && !(t[0] + k * t[2] in [2])))",message="schedule never fires: its earliest day of month is the 30th, and the only month it names is February (such as 0 0 30 2 *); with a day of week as well (0 0 30 2 mon) it fires on that day"
	Schedule string `json:"schedule"`

	// suspend stops scheduled snapshots; snapshots asked for with the
	// etcdfed.dev/backup-requested annotation (etcdfed backup NAME) are
	// still taken. Default false.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// retention says which snapshots of this cluster are kept in the store;
	// older ones are deleted after each successful backup. The newest
	// snapshot is never deleted. Default: the newest 7.
	// +optional
	Retention BackupRetention `json:"retention,omitempty"`

	// store is where snapshots are written.
	// +required
	Store BackupStore `json:"store"`

	// timeout bounds one backup: streaming the snapshot from a member,
	// checking it and uploading it. Between 1m and 24h. Default 15m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="timeout must be between 1m and 24h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// BackupRetention says which snapshots are kept. When both fields are set,
// a snapshot is deleted when either says so.
type BackupRetention struct {
	// maxCount keeps at most this many snapshots, the newest; 1 to 10000.
	// Default 7 when maxAge is not set either.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxCount *int32 `json:"maxCount,omitempty"`

	// maxAge deletes snapshots taken longer ago than this, such as "168h"
	// (a week); at least 1h. The newest snapshot is kept whatever its age.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="retention.maxAge must be at least 1h"
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BackupStore is an object store reached through gocloud.dev/blob.
// +kubebuilder:validation:XValidation:rule="!has(self.s3) || self.url.startsWith('s3://')",message="store.s3 applies to s3:// stores only"
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsSecretName) || !self.url.startsWith('file://')",message="a file:// store takes no credentials: remove credentialsSecretName"
type BackupStore struct {
	// url says where snapshots go: s3://BUCKET[/PREFIX] (Amazon S3 or an
	// S3-compatible store, see s3), gs://BUCKET[/PREFIX] (Google Cloud
	// Storage), azblob://CONTAINER[/PREFIX] (Azure Blob Storage; the storage
	// account comes from the credentials Secret), or file:///ABSOLUTE/PATH
	// (a directory on the hub's filesystem, for the local environment and
	// single-machine setups). Each snapshot is the object
	// PREFIX/<namespace>/<name>/<etcd cluster ID>/<time>-rev<revision>.db,
	// with a .json sidecar beside it, so listing the store gives the
	// history. Query parameters are not accepted: use the fields below.
	// +required
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^(s3|gs|azblob|file)://')",message="store.url must start with s3://, gs://, azblob:// or file://"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(s3|gs|azblob)://') || self.matches('^(s3|gs|azblob)://[a-z0-9][a-z0-9._-]{1,61}[a-z0-9](/[A-Za-z0-9._~=+@-]+)*/?$')",message="store.url must be SCHEME://BUCKET[/PREFIX]: a bucket of 3-63 lowercase letters, digits, '.', '_' or '-', then optional path segments of letters, digits and ._~=+@- (no query string)"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('file://') || self.matches('^file:///[A-Za-z0-9._~=+@/-]*$')",message="a file:// store needs an absolute path such as file:///var/lib/etcdfed/backups (letters, digits, ._~=+@-; no query string)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('/[.][.]?(/|$)')",message="store.url must not contain '.' or '..' path segments"
	URL string `json:"url"`

	// s3 holds options of s3:// stores.
	// +optional
	S3 *S3StoreOptions `json:"s3,omitempty"`

	// credentialsSecretName is a Secret in the EtcdCluster's namespace, in
	// the hub cluster, holding the store's credentials: for s3://
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN
	// optional); for gs:// service-account.json (a service account key);
	// for azblob:// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or
	// AZURE_STORAGE_SAS_TOKEN. When empty, the hub's own credentials are
	// used (its environment, instance role or workload identity). Not used
	// by file://.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`
}

// S3StoreOptions configure an s3:// store.
// +kubebuilder:validation:XValidation:rule="!has(self.endpoint) || !self.endpoint.startsWith('http://') || (has(self.insecure) && self.insecure)",message="s3.endpoint http:// sends the store's credentials and the snapshots unencrypted: use https://, or set s3.insecure: true for a store on a trusted network"
type S3StoreOptions struct {
	// endpoint is the URL of an S3-compatible service, such as
	// https://minio.example.com:9000; empty for Amazon S3. No user or
	// password in it (they belong in credentialsSecretName's Secret), and
	// http:// only with insecure.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#]+/?$')",message="s3.endpoint must be http(s)://HOST[:PORT] with no path"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-z]+://[^/?#]*@')",message="s3.endpoint must not carry a user or password (user:secret@host): put the store's credentials in the Secret named by credentialsSecretName"
	Endpoint string `json:"endpoint,omitempty"`

	// insecure allows an http:// endpoint: the store's credentials and
	// every snapshot then cross the network unencrypted. For a store on
	// the same host or a trusted network only. Default false.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// region of the bucket, such as eu-west-1. Default us-east-1.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	Region string `json:"region,omitempty"`

	// forcePathStyle addresses the bucket as ENDPOINT/BUCKET instead of
	// BUCKET.ENDPOINT; most S3-compatible stores need it. Default false.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
}

// BackupTrigger says why a backup was taken.
// +kubebuilder:validation:Enum=Schedule;Request
type BackupTrigger string

const (
	// BackupTriggerSchedule: spec.backup.schedule was due.
	BackupTriggerSchedule BackupTrigger = "Schedule"
	// BackupTriggerRequest: the etcdfed.dev/backup-requested annotation
	// asked for it.
	BackupTriggerRequest BackupTrigger = "Request"
)

// BackupStatus is what the hub observed of backups.
type BackupStatus struct {
	// lastSuccess is the newest snapshot taken, checked and stored.
	// +optional
	LastSuccess *BackupSnapshot `json:"lastSuccess,omitempty"`

	// lastFailure is the newest backup that failed, with the reason.
	// +optional
	LastFailure *BackupFailure `json:"lastFailure,omitempty"`

	// inProgress is the backup being taken, recorded before it starts. A
	// hub restarted during a backup starts it again.
	// +optional
	InProgress *BackupInProgress `json:"inProgress,omitempty"`

	// consecutiveFailures counts failed backups since the last success; a
	// failed scheduled backup is retried after 30s, doubling up to 10m.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`

	// nextScheduleTime is when the next scheduled backup is due.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// lastRequest is the value of the etcdfed.dev/backup-requested
	// annotation last handled, successfully or not.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	LastRequest string `json:"lastRequest,omitempty"`

	// retained is the number of snapshots of this etcd cluster in the store
	// after the last pruning.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Retained int32 `json:"retained,omitempty"`
}

// BackupSnapshot describes one stored snapshot.
type BackupSnapshot struct {
	// time is when the snapshot was taken (its stream started).
	// +required
	Time metav1.Time `json:"time"`

	// revision is the etcd revision the snapshot holds: every write
	// acknowledged at or below it is in the snapshot.
	// +required
	// +kubebuilder:validation:Minimum=0
	Revision int64 `json:"revision"`

	// sizeBytes is the size of the stored object.
	// +required
	// +kubebuilder:validation:Minimum=0
	SizeBytes int64 `json:"sizeBytes"`

	// duration of the whole backup: stream, check and upload.
	// +required
	Duration metav1.Duration `json:"duration"`

	// location is the object's URL, such as
	// s3://bucket/prefix/ns/main/8e9e05c52164694d/20260102T030405Z-rev1234.db.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	Location string `json:"location"`

	// member is the member the snapshot was streamed from.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Member string `json:"member,omitempty"`

	// hash is the snapshot's content hash as etcdutl snapshot status
	// prints it (crc32, hex).
	// +optional
	// +kubebuilder:validation:MaxLength=8
	Hash string `json:"hash,omitempty"`

	// trigger says why it was taken: Schedule or Request.
	// +optional
	Trigger BackupTrigger `json:"trigger,omitempty"`

	// request is the etcdfed.dev/backup-requested value that asked for it
	// (trigger Request).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Request string `json:"request,omitempty"`
}

// BackupFailure describes a failed backup.
type BackupFailure struct {
	// time is when the backup failed.
	// +required
	Time metav1.Time `json:"time"`

	// reason is a BackupHealthy condition reason, such as StoreUnreachable or
	// VerificationFailed.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`

	// message says what failed.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// trigger says why the backup was attempted: Schedule or Request.
	// +optional
	Trigger BackupTrigger `json:"trigger,omitempty"`

	// request is the etcdfed.dev/backup-requested value that asked for it
	// (trigger Request).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Request string `json:"request,omitempty"`
}

// BackupInProgress is a backup under way.
type BackupInProgress struct {
	// startedAt is when it was recorded.
	// +required
	StartedAt metav1.Time `json:"startedAt"`

	// trigger says why: Schedule or Request.
	// +required
	Trigger BackupTrigger `json:"trigger"`

	// request is the annotation value being handled (trigger Request).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Request string `json:"request,omitempty"`
}

// ConditionBackupHealthy on an EtcdCluster with spec.backup: True when the
// last backup succeeded and was pruned by retention; False with one of the
// Backup* reasons below when it failed; Unknown while no backup was tried.
// It never gates anything else the hub does.
const ConditionBackupHealthy = "BackupHealthy"

// Reasons of the BackupHealthy condition and of status.backup.lastFailure.
const (
	// BackupReasonSucceeded: the last snapshot was taken, checked, stored
	// and retention applied.
	BackupReasonSucceeded = "BackupSucceeded"
	// BackupReasonPending: no backup has been tried yet (etcd has not
	// formed, or the first one is under way).
	BackupReasonPending = "Pending"
	// BackupReasonSuspended: spec.backup.suspend is true and no backup was
	// tried yet.
	BackupReasonSuspended = "Suspended"
	// BackupReasonInvalidSpec: the schedule or store cannot be used (the
	// message says which); nothing is tried until the spec changes.
	BackupReasonInvalidSpec = "InvalidSpec"
	// BackupReasonCredentials: the credentials Secret is missing or lacks a
	// key the store needs.
	BackupReasonCredentials = "CredentialsUnavailable"
	// BackupReasonStoreUnreachable: the store did not answer, refused the
	// credentials, or the bucket does not exist. No snapshot was taken.
	BackupReasonStoreUnreachable = "StoreUnreachable"
	// BackupReasonNoHealthyMember: no member could serve a snapshot.
	BackupReasonNoHealthyMember = "NoHealthyMember"
	// BackupReasonSnapshotFailed: streaming the snapshot from the member
	// failed or took longer than spec.backup.timeout.
	BackupReasonSnapshotFailed = "SnapshotFailed"
	// BackupReasonVerificationFailed: the snapshot failed its check (sha256
	// appended by etcd, bbolt structure, revision); it was not uploaded.
	BackupReasonVerificationFailed = "VerificationFailed"
	// BackupReasonUploadFailed: the store refused or lost the upload.
	BackupReasonUploadFailed = "UploadFailed"
	// BackupReasonPruneFailed: the snapshot was stored but older ones could
	// not be deleted, so retention is not being applied.
	BackupReasonPruneFailed = "PruneFailed"
	// BackupReasonInsufficientSpace: the hub's scratch directory
	// (--backup-scratch-dir) has less free space than the source member's
	// database file plus a 64 MiB margin; nothing was streamed. The
	// message names the bytes needed and available.
	BackupReasonInsufficientSpace = "InsufficientSpace"
)
