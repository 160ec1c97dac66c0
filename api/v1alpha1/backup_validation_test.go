package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func withBackup(ns string, b etcdfedv1.BackupSpec) *etcdfedv1.EtcdCluster {
	c := validCluster(ns)
	c.Spec.Backup = &b
	return c
}

func s3Backup() etcdfedv1.BackupSpec {
	return etcdfedv1.BackupSpec{
		Schedule: "0 */6 * * *",
		Store:    etcdfedv1.BackupStore{URL: "s3://etcd-backups/ring-a", CredentialsSecretName: "backup-creds"},
	}
}

// TestBackupValidObjectsAccepted: every schedule form, store scheme and
// option a user may write is accepted by the real apiserver.
func TestBackupValidObjectsAccepted(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "backup-valid")
	ctx := context.Background()
	for _, schedule := range []string{
		"0 */6 * * *", "*/15 * * * *", "30 2 * * sun", "0 0 1 jan,jul *", "0 3 * * MON-FRI", "5,35 9-17/2 ? * 1-5",
		"59 23 31 12 6", "0 0 1-7 * *", "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually",
		"@every 1m", "@every 1h30m", "@every 90s",
		// Near the schedules that never fire, but fire: a day of week as
		// well (either matches), February 29th (leap years), a month
		// that has the day, a list or a range reaching a low day.
		"0 0 31 2 mon", "0 0 29 2 *", "0 0 30 1-12/2 *", "0 0 31 jan,feb *", "0 0 31 */2 *", "0 0 30,1 2 *",
		"0 0 31 feb-mar *", "0 0 31 2/5 *", "0 0 30 4 ?", "0 0 31 2 */2", "0 0 31-31 7 *",
	} {
		b := s3Backup()
		b.Schedule = schedule
		if err := apiserver.Client.Create(ctx, withBackup(ns, b)); err != nil {
			t.Errorf("schedule %q rejected: %v", schedule, err)
		}
	}
	for _, store := range []etcdfedv1.BackupStore{
		{URL: "s3://etcd-backups"},
		{URL: "s3://etcd-backups/"},
		{URL: "s3://etcd.backups-eu/a/b/c", CredentialsSecretName: "creds",
			S3: &etcdfedv1.S3StoreOptions{Endpoint: "http://127.0.0.1:9000", Insecure: true, Region: "eu-west-1", ForcePathStyle: true}},
		{URL: "s3://bucket/p", S3: &etcdfedv1.S3StoreOptions{Endpoint: "https://minio.example.com"}},
		{URL: "gs://etcd_backups/ring", CredentialsSecretName: "gcs"},
		{URL: "azblob://backups/ring", CredentialsSecretName: "azure"},
		{URL: "file:///var/lib/etcdfed/backups"},
	} {
		b := s3Backup()
		b.Store = store
		if err := apiserver.Client.Create(ctx, withBackup(ns, b)); err != nil {
			t.Errorf("store %+v rejected: %v", store, err)
		}
	}
	full := s3Backup()
	full.Suspend = true
	full.Timeout = &metav1.Duration{Duration: 3600e9}
	full.Retention = etcdfedv1.BackupRetention{MaxCount: ptr.To[int32](30), MaxAge: &metav1.Duration{Duration: 7 * 24 * 3600e9}}
	if err := apiserver.Client.Create(ctx, withBackup(ns, full)); err != nil {
		t.Errorf("full backup spec rejected: %v", err)
	}
}

// TestBackupValidation: bad schedules, stores, retention and timeouts are
// refused at admission with a message that says what to write instead.
func TestBackupValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "backup-invalid")
	const badCron = "schedule must be cron syntax"
	for _, tc := range []struct {
		name   string
		mutate func(*etcdfedv1.BackupSpec)
		want   string
	}{
		{"empty schedule", func(b *etcdfedv1.BackupSpec) { b.Schedule = "" }, "spec.backup.schedule"},
		{"six fields (seconds)", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 */6 * * *" }, badCron},
		{"four fields", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 */6 * *" }, badCron},
		{"minute 60", func(b *etcdfedv1.BackupSpec) { b.Schedule = "60 * * * *" }, badCron},
		{"hour 24", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 24 * * *" }, badCron},
		{"day 0", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 0 * *" }, badCron},
		{"day 32", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 32 * *" }, badCron},
		{"month 13", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 1 13 *" }, badCron},
		{"weekday 7", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 * * 7" }, badCron},
		{"step 0", func(b *etcdfedv1.BackupSpec) { b.Schedule = "*/0 * * * *" }, badCron},
		{"quartz L", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 L * *" }, badCron},
		{"unknown month name", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 1 foo *" }, badCron},
		{"time zone prefix", func(b *etcdfedv1.BackupSpec) { b.Schedule = "CRON_TZ=Europe/Berlin 0 3 * * *" }, badCron},
		{"unknown descriptor", func(b *etcdfedv1.BackupSpec) { b.Schedule = "@fortnightly" }, badCron},
		{"every without unit", func(b *etcdfedv1.BackupSpec) { b.Schedule = "@every 10" }, badCron},
		{"every too often", func(b *etcdfedv1.BackupSpec) { b.Schedule = "@every 30s" }, "@every needs an interval of at least 1m"},
		// Schedules that never fire (robfig/cron gives them no next time,
		// and the hub backed up back to back).
		{"February 31st", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 31 2 *" }, "schedule never fires"},
		{"February 30th", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 30 feb ?" }, "schedule never fires"},
		{"the 31st of the 30-day months", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 31 4,6,9,11 *" }, "schedule never fires"},
		{"the 31st of April and June (a range with a step)", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 31 apr-jun/2 *" }, "schedule never fires"},
		{"February 30th and 31st", func(b *etcdfedv1.BackupSpec) { b.Schedule = "0 0 30-31 2 */1" }, "schedule never fires"},
		{"schedule too long", func(b *etcdfedv1.BackupSpec) { b.Schedule = strings.Repeat("1,", 70) + "1 * * * *" }, "spec.backup.schedule: Too long"},
		{"retention count 0", func(b *etcdfedv1.BackupSpec) { b.Retention.MaxCount = ptr.To[int32](0) }, "spec.backup.retention.maxCount: Invalid value: 0"},
		{"retention count negative", func(b *etcdfedv1.BackupSpec) { b.Retention.MaxCount = ptr.To[int32](-3) }, "should be greater than or equal to 1"},
		{"retention count huge", func(b *etcdfedv1.BackupSpec) { b.Retention.MaxCount = ptr.To[int32](10001) }, "should be less than or equal to 10000"},
		{"retention age 10m", func(b *etcdfedv1.BackupSpec) { b.Retention.MaxAge = &metav1.Duration{Duration: 600e9} }, "retention.maxAge must be at least 1h"},
		{"timeout 10s", func(b *etcdfedv1.BackupSpec) { b.Timeout = &metav1.Duration{Duration: 10e9} }, "timeout must be between 1m and 24h"},
		{"timeout 2 days", func(b *etcdfedv1.BackupSpec) { b.Timeout = &metav1.Duration{Duration: 48 * 3600e9} }, "timeout must be between 1m and 24h"},
		{"http store", func(b *etcdfedv1.BackupSpec) { b.Store.URL = "https://bucket.s3.amazonaws.com/x" }, "store.url must start with s3://, gs://, azblob:// or file://"},
		{"s3 without bucket", func(b *etcdfedv1.BackupSpec) { b.Store.URL = "s3:///prefix" }, "store.url must be SCHEME://BUCKET[/PREFIX]"},
		{"uppercase bucket", func(b *etcdfedv1.BackupSpec) { b.Store.URL = "s3://Backups/x" }, "store.url must be SCHEME://BUCKET[/PREFIX]"},
		{"query string", func(b *etcdfedv1.BackupSpec) { b.Store.URL = "s3://backups/x?region=eu-west-1" }, "no query string"},
		{"double slash in prefix", func(b *etcdfedv1.BackupSpec) { b.Store.URL = "gs://backups/a//b" }, "store.url must be SCHEME://BUCKET[/PREFIX]"},
		{"dot-dot prefix", func(b *etcdfedv1.BackupSpec) { b.Store.URL = "s3://backups/a/../b" }, "must not contain '.' or '..' path segments"},
		{"relative file path", func(b *etcdfedv1.BackupSpec) {
			b.Store = etcdfedv1.BackupStore{URL: "file://backups/etcd"}
		}, "a file:// store needs an absolute path"},
		{"file with credentials", func(b *etcdfedv1.BackupSpec) {
			b.Store = etcdfedv1.BackupStore{URL: "file:///var/backups", CredentialsSecretName: "creds"}
		}, "a file:// store takes no credentials"},
		{"s3 options on gs", func(b *etcdfedv1.BackupSpec) {
			b.Store = etcdfedv1.BackupStore{URL: "gs://backups", S3: &etcdfedv1.S3StoreOptions{ForcePathStyle: true}}
		}, "store.s3 applies to s3:// stores only"},
		{"endpoint with path", func(b *etcdfedv1.BackupSpec) {
			b.Store.S3 = &etcdfedv1.S3StoreOptions{Endpoint: "http://127.0.0.1:9000/bucket"}
		}, "s3.endpoint must be http(s)://HOST[:PORT] with no path"},
		{"endpoint with user and password", func(b *etcdfedv1.BackupSpec) {
			b.Store.S3 = &etcdfedv1.S3StoreOptions{Endpoint: "https://admin:secret@minio.example.com:9000"}
		}, "s3.endpoint must not carry a user or password"},
		{"endpoint with a user", func(b *etcdfedv1.BackupSpec) {
			b.Store.S3 = &etcdfedv1.S3StoreOptions{Endpoint: "http://admin@127.0.0.1:9000", Insecure: true}
		}, "s3.endpoint must not carry a user or password"},
		{"plain http endpoint", func(b *etcdfedv1.BackupSpec) {
			b.Store.S3 = &etcdfedv1.S3StoreOptions{Endpoint: "http://minio.example.com:9000"}
		}, "s3.endpoint http:// sends the store's credentials and the snapshots unencrypted"},
		{"endpoint without scheme", func(b *etcdfedv1.BackupSpec) {
			b.Store.S3 = &etcdfedv1.S3StoreOptions{Endpoint: "minio:9000"}
		}, "s3.endpoint must be http(s)://HOST[:PORT] with no path"},
		{"bad region", func(b *etcdfedv1.BackupSpec) {
			b.Store.S3 = &etcdfedv1.S3StoreOptions{Region: "EU West"}
		}, "spec.backup.store.s3.region"},
		{"bad secret name", func(b *etcdfedv1.BackupSpec) { b.Store.CredentialsSecretName = "Backup_Creds" }, "spec.backup.store.credentialsSecretName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := s3Backup()
			tc.mutate(&b)
			wantInvalid(t, apiserver.Client.Create(context.Background(), withBackup(ns, b)), tc.want)
		})
	}
}
