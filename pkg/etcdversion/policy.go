package etcdversion

// The policy. Every fact below was checked against etcd's own sources:
// the CHANGELOG-3.5/3.6/3.7 files of go.etcd.io/etcd, the upgrade and
// downgrade guides of etcd.io (etcd-io/website content/en/docs/v3.7) and
// etcd's blog. Source names where each comes from; the tests of this
// package check the invariants (ranges in order, fixes outside them, the
// newest patch of each line accepted) and that hack/tools.sh builds the
// newest patches named here.

// Line is one minor release line etcdfed runs, such as 3.7.
type Line struct {
	// Minor is the line's version, patch 0 (3.7.0 for 3.7).
	Minor Version
	// Newest is the newest patch release etcdfed is tested with: the one
	// the local environment builds (hack/tools.sh), and the step a path
	// through this line goes by.
	Newest Version
	// UpgradeFrom, when not zero, is the lowest patch of the previous line
	// from which etcd supports moving a ring to this line; a ring on an
	// older patch goes to the previous line's Newest first.
	// UpgradeFromWhy says why; Source where etcd says so.
	UpgradeFrom    Version
	UpgradeFromWhy string
	UpgradeSource  string
	// UpgradeBlog, when set, is etcd's blog post on the problem the
	// minimum patch avoids.
	UpgradeBlog string
	// Downgrade is true when etcd downgrades a ring from this line to the
	// previous one (etcdctl downgrade enable <previous minor>), which the
	// hub then follows; DowngradeSource is etcd's guide.
	Downgrade       bool
	DowngradeSource string
	// KnownBad are patch ranges of this line etcdfed refuses to run, in
	// order and not overlapping.
	KnownBad []Bad
}

// Bad is a range of patch releases with a bug that the operations etcdfed
// performs can hit.
type Bad struct {
	// First and Last are the first and last affected releases.
	First, Last Version
	// Fixed is the release that fixes it.
	Fixed Version
	// Why says what goes wrong, in a phrase that follows "refused: ".
	Why string
	// Source is where etcd says so.
	Source string
}

// KubernetesTested are the Kubernetes releases of the member clusters (and
// the hub) that the tests run: the local environment's kube-apiserver
// (hack/tools.sh KUBE_VERSION).
var KubernetesTested = []string{"1.36.3"}

// forceNewClusterLearners is the bug of 3.5.23 to 3.5.24 and 3.6.5.
const forceNewClusterLearners = "--force-new-cluster does not clean up learners after it creates its snapshot (etcd #20896), " +
	"and etcdfed's quorum-loss recovery restarts a survivor with it"

const (
	changelog35 = "https://github.com/etcd-io/etcd/blob/main/CHANGELOG/CHANGELOG-3.5.md"
	changelog36 = "https://github.com/etcd-io/etcd/blob/main/CHANGELOG/CHANGELOG-3.6.md"
	// zombieMembersBlog is etcd's account of the 'zombie members' of 3.5
	// to 3.6 upgrades from 3.5.25 or older, and of the repair in 3.5.26.
	zombieMembersBlog = "https://etcd.io/blog/2025/zombie_members_upgrade/"
)

// lines are the release lines etcdfed runs, oldest first, each one minor
// above the one before.
var lines = []Line{
	{
		Minor:  MustParse("3.5.0"),
		Newest: MustParse("3.5.35"),
		KnownBad: []Bad{
			{
				First: MustParse("3.5.0"), Last: MustParse("3.5.22"), Fixed: MustParse("3.5.23"),
				Why: "a member can corrupt its data when a snapshot from the leader is applied while it defragments, " +
					"and etcdfed defragments members (etcd #20653; the same line also lost data on a crash under load before 3.5.3, #13766, " +
					"and during a defragmentation before 3.5.6, #14730)",
				Source: changelog35 + "#v3523",
			},
			{
				First: MustParse("3.5.23"), Last: MustParse("3.5.24"), Fixed: MustParse("3.5.25"),
				Why:    forceNewClusterLearners,
				Source: changelog35 + "#v3525",
			},
		},
	},
	{
		Minor:       MustParse("3.6.0"),
		Newest:      MustParse("3.6.16"),
		UpgradeFrom: MustParse("3.5.32"),
		UpgradeFromWhy: "etcd's upgrade guide: 3.5.26 repairs 'zombie members' (members removed long ago that come back " +
			"after the upgrade), and 3.5.24 to 3.5.32 fix further upgrade blockers",
		UpgradeBlog:     zombieMembersBlog,
		UpgradeSource:   "https://etcd.io/docs/v3.6/upgrades/upgrade_3_6/",
		Downgrade:       true,
		DowngradeSource: "https://etcd.io/docs/v3.7/downgrades/downgrade_3_6/",
		KnownBad: []Bad{
			{
				First: MustParse("3.6.0"), Last: MustParse("3.6.4"), Fixed: MustParse("3.6.5"),
				Why: "a member can corrupt its data when a snapshot from the leader is applied while it defragments (etcd #20650), " +
					"and before 3.6.4 a member that replays a learner's promotion fails to start (#20387); etcdfed defragments members " +
					"and adds every member as a learner",
				Source: changelog36 + "#v365",
			},
			{
				First: MustParse("3.6.5"), Last: MustParse("3.6.5"), Fixed: MustParse("3.6.6"),
				Why:    forceNewClusterLearners,
				Source: changelog36 + "#v366",
			},
		},
	},
	{
		Minor:           MustParse("3.7.0"),
		Newest:          MustParse("3.7.3"),
		UpgradeFrom:     MustParse("3.6.11"),
		UpgradeFromWhy:  "etcd's upgrade guide: earlier 3.6 patches may not be compatible with a rolling upgrade to 3.7",
		UpgradeSource:   "https://etcd.io/docs/v3.7/upgrades/upgrade_3_7/",
		Downgrade:       true,
		DowngradeSource: "https://etcd.io/docs/v3.7/downgrades/downgrade_3_7/",
	},
}

// Lines returns the release lines etcdfed runs, oldest first.
func Lines() []Line {
	out := make([]Line, len(lines))
	copy(out, lines)
	return out
}

// Default is the version a new ring gets when none is chosen: the newest
// patch of the newest line.
func Default() Version { return lines[len(lines)-1].Newest }

// Oldest and NewestLine are the first and last lines etcdfed runs.
func Oldest() Line     { return lines[0] }
func NewestLine() Line { return lines[len(lines)-1] }

// LineOf returns the line of v's minor version; ok is false when etcdfed
// does not run that minor.
func LineOf(v Version) (Line, bool) {
	for _, l := range lines {
		if l.Minor.SameMinor(v) {
			return l, true
		}
	}
	return Line{}, false
}

// Newest returns the newest patch of v's minor version; ok is false when
// etcdfed does not run that minor.
func Newest(v Version) (Version, bool) {
	l, ok := LineOf(v)
	return l.Newest, ok
}

// badFor returns the known-bad range v falls in.
func badFor(v Version) (Bad, bool) {
	l, ok := LineOf(v)
	if !ok {
		return Bad{}, false
	}
	for _, b := range l.KnownBad {
		if b.Affects(v) {
			return b, true
		}
	}
	return Bad{}, false
}

// Affects reports whether v is one of b's releases.
func (b Bad) Affects(v Version) bool { return v.Compare(b.First) >= 0 && v.Compare(b.Last) <= 0 }

// PromotionReplay is the bug of an adopted cluster's original members
// (members etcdfed never runs, so not a KnownBad of theirs): on these
// releases a member that replays a learner's promotion from its log fails
// to start, and etcdfed adds every member of its own as a learner and
// promotes it, so an original restarted during an adoption would not
// come back. An adoption holds on originals that run them.
var PromotionReplay = Bad{
	First: MustParse("3.6.0"), Last: MustParse("3.6.3"), Fixed: MustParse("3.6.4"),
	Why: "a member before 3.6.4 that replays a learner's promotion fails to start (etcd #20387), and etcdfed joins its members " +
		"as learners and promotes them: an original restarted during the adoption would not come back",
	Source: changelog36 + "#v364",
}
