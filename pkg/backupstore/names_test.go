package backupstore

import (
	"sort"
	"testing"
	"time"
)

func TestSnapshotKeyRoundTrip(t *testing.T) {
	dir := ClusterDir("team-a", "main", "8e9e05c52164694d")
	if dir != "team-a/main/8e9e05c52164694d/" {
		t.Fatalf("ClusterDir = %q", dir)
	}
	for _, tc := range []struct {
		t    time.Time
		rev  int64
		want string
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 1234, "team-a/main/8e9e05c52164694d/20260102T030405.000Z-rev1234.db"},
		{time.Date(2026, 12, 31, 23, 59, 59, 999_999_999, time.UTC), 1, "team-a/main/8e9e05c52164694d/20261231T235959.999Z-rev1.db"},
		// Not UTC on input: the name is UTC.
		{time.Date(2026, 6, 1, 2, 0, 0, 0, time.FixedZone("CEST", 2*3600)), 7, "team-a/main/8e9e05c52164694d/20260601T000000.000Z-rev7.db"},
	} {
		key := SnapshotKey(dir, tc.t, tc.rev)
		if key != tc.want {
			t.Errorf("SnapshotKey(%v, %d) = %q, want %q", tc.t, tc.rev, key, tc.want)
		}
		snap, ok := ParseKey(key)
		if !ok || snap.Revision != tc.rev || !snap.Time.Equal(tc.t.Truncate(time.Millisecond)) || snap.Key != key {
			t.Errorf("ParseKey(%q) = %+v, %v", key, snap, ok)
		}
		if md := MetadataKey(key); md != key[:len(key)-len(SnapshotExt)]+".json" {
			t.Errorf("MetadataKey(%q) = %q", key, md)
		}
	}
}

// TestParseKeyRefusesForeignObjects: only our own names are snapshots, so
// pruning never deletes an object a human put next to them.
func TestParseKeyRefusesForeignObjects(t *testing.T) {
	for _, key := range []string{
		"team-a/main/x/20260102T030405.000Z-rev1234.json",
		"team-a/main/x/20260102T030405.000Z-rev1234.db.bak",
		"team-a/main/x/20260102T030405Z-rev1234.db",
		"team-a/main/x/20260102T030405.000Z-revX.db",
		"team-a/main/x/manual-before-upgrade.db",
		"team-a/main/x/20261302T030405.000Z-rev1.db", // month 13
		"",
	} {
		if snap, ok := ParseKey(key); ok {
			t.Errorf("ParseKey(%q) = %+v, want not a snapshot", key, snap)
		}
	}
}

// TestNamesSortAsHistory: a plain sort of keys is the order they were
// taken in, across days, months and years.
func TestNamesSortAsHistory(t *testing.T) {
	base := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	var keys, want []string
	for i, d := range []time.Duration{0, time.Millisecond, time.Second, time.Hour, 24 * time.Hour, 40 * 24 * time.Hour} {
		k := SnapshotKey("ns/n/id/", base.Add(d), int64(10-i)) // revisions need not sort
		want = append(want, k)
	}
	keys = append(keys, want...)
	for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
		keys[i], keys[j] = keys[j], keys[i]
	}
	sort.Strings(keys)
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("sorted keys %v, want %v", keys, want)
		}
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Location
		wantErr bool
	}{
		{in: "s3://bucket", want: Location{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://bucket/", want: Location{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://bucket/a/b/", want: Location{Scheme: "s3", Bucket: "bucket", Prefix: "a/b"}},
		{in: "gs://bkt/p", want: Location{Scheme: "gs", Bucket: "bkt", Prefix: "p"}},
		{in: "azblob://cnt/p", want: Location{Scheme: "azblob", Bucket: "cnt", Prefix: "p"}},
		{in: "file:///var/backups/", want: Location{Scheme: "file", Dir: "/var/backups"}},
		{in: "file://relative/x", wantErr: true},
		{in: "s3:///p", wantErr: true},
		{in: "s3://b/p?region=x", wantErr: true},
		{in: "http://b/p", wantErr: true},
		{in: "s3://user:pw@b/p", wantErr: true},
		// Buckets and prefixes as the CRD describes them, for specs stored
		// before its rules and for EtcdMembers a spoke reads.
		{in: "s3://bucket:443/p", wantErr: true},
		{in: "s3://Bucket/p", wantErr: true},
		{in: "s3://b/p", wantErr: true},
		{in: "s3://bucket/a/../b", wantErr: true},
		{in: "s3://bucket/a/%2e%2e/b", wantErr: true},
		{in: "s3://bucket/a b", wantErr: true},
		{in: "azblob://[::1]/p", wantErr: true},
	} {
		got, err := ParseURL(tc.in)
		if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && got.Scheme != "file" && got.String() != "s3://b" && got.String()+"/" != tc.in && got.String() != tc.in {
			t.Errorf("%q: String() = %q", tc.in, got.String())
		}
	}
}
