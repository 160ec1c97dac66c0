package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// When a member's database sizes are news. The spoke reports a member's
// etcd view (status.etcd) and, to keep writes at rest low, rewrites a view
// in which only counters moved (raft index, sizes, the time it looked)
// once in five minutes; the hub, for the same reason, does not wake for
// such a rewrite. The sizes are what the hub's size policies act on
// (defragmentation of a fragmented file, the NOSPACE guard at 90% of the
// quota), so a move of them that such a policy may care about is written
// by the spoke at once and wakes the hub at once: both use SizeNews.

// DefaultQuotaBackendBytes is etcd's backend quota when
// spec.etcd.quotaBackendBytes is not set (2 GiB).
const DefaultQuotaBackendBytes int64 = 2 << 30

// Size thresholds of SizeNews.
const (
	// sizeNewsFraction: a size that moved by at least a tenth of its last
	// reported value is news (so every threshold a policy may set is seen
	// within a tenth of it)...
	sizeNewsFraction = 10
	// sizeNewsFloor: ...and by at least 1 MiB (the smallest
	// minReclaimable), so that a small database's noise is not.
	sizeNewsFloor int64 = 1 << 20
	// noSpaceGuardPercent: the hub's NOSPACE guard acts on a file above
	// 90% of the quota.
	noSpaceGuardPercent = 90
)

// QuotaBytes is the member's backend quota: spec.etcd.quotaBackendBytes, or
// etcd's default.
func (m *EtcdMember) QuotaBytes() int64 {
	if q := m.Spec.Etcd.QuotaBackendBytes; q != nil && q.Value() > 0 {
		return q.Value()
	}
	return DefaultQuotaBackendBytes
}

// SizeNews reports whether the database sizes of cur moved from those of
// old enough for a size policy to act on at once: a size known for the
// first time; a size (file or in use) that moved by a tenth and at least
// 1 MiB; the file fragmented beyond the default defragmentation
// thresholds (45% and 100 MiB free) or no longer; the file above 90% of
// quota or no longer.
func SizeNews(old, cur *MemberEtcdView, quota int64) bool {
	if old == nil || cur == nil {
		return old != cur
	}
	if (old.DBSize == 0) != (cur.DBSize == 0) || (old.DBSizeInUse == 0) != (cur.DBSizeInUse == 0) {
		return true
	}
	if moved(old.DBSize, cur.DBSize) || moved(old.DBSizeInUse, cur.DBSizeInUse) {
		return true
	}
	if fragmented(old) != fragmented(cur) {
		return true
	}
	return quota > 0 && (old.DBSize*100 > quota*noSpaceGuardPercent) != (cur.DBSize*100 > quota*noSpaceGuardPercent)
}

func moved(a, b int64) bool {
	d := b - a
	if d < 0 {
		d = -d
	}
	return d >= sizeNewsFloor && d*sizeNewsFraction >= a
}

// fragmented: beyond the default defragmentation thresholds
// (DefaultDefragMinFragmentedPercent of the file and
// DefaultDefragMinReclaimable free).
func fragmented(v *MemberEtcdView) bool {
	free := v.DBSize - v.DBSizeInUse
	return v.DBSizeInUse > 0 && free >= defaultMinReclaimable && free*100 >= v.DBSize*int64(DefaultDefragMinFragmentedPercent)
}

var defaultMinReclaimable = func() int64 { q := resource.MustParse(DefaultDefragMinReclaimable); return q.Value() }()
