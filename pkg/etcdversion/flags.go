package etcdversion

// Flags whose spelling depends on the etcd version. etcd 3.6 graduated the
// --experimental-* flags to names without the prefix (the old names kept
// working, deprecated) and etcd 3.7 removed the old names: a 3.7 process
// given one does not start (RemovedIn37Source). etcdfed passes only the
// flags in this table whose spelling differs between versions; every other
// flag it passes has the same name in 3.5, 3.6 and 3.7.

// Flag names an etcd setting by its name in the newest line.
type Flag string

const (
	// FlagMaxLearners caps the learners in the cluster. etcd 3.5 has no
	// flag (one learner is its fixed limit); 3.6 added --max-learners.
	FlagMaxLearners Flag = "max-learners"
	// FlagPeerSkipClientSANVerification skips the check of a peer's source
	// address against its client certificate. etcd 3.5 spells it
	// --experimental-peer-skip-client-san-verification; 3.6 graduated it
	// and 3.7 removed the old name.
	FlagPeerSkipClientSANVerification Flag = "peer-skip-client-san-verification"
)

// spelling is a flag's name from one minor version on.
type spelling struct {
	from Version // the first minor with this name (patch 0)
	name string  // "" when those versions have no such flag
}

// flagSpellings lists each flag's spellings, oldest first.
var flagSpellings = map[Flag][]spelling{
	FlagMaxLearners: {
		{from: MustParse("3.5.0"), name: ""},
		{from: MustParse("3.6.0"), name: "max-learners"},
	},
	FlagPeerSkipClientSANVerification: {
		{from: MustParse("3.5.0"), name: "experimental-peer-skip-client-san-verification"},
		{from: MustParse("3.6.0"), name: "peer-skip-client-san-verification"},
	},
}

// Flags returns every flag in the table.
func Flags() []Flag { return []Flag{FlagMaxLearners, FlagPeerSkipClientSANVerification} }

// FlagName is how etcd v spells f, without the leading dashes; "" when v
// has no such flag.
func FlagName(v Version, f Flag) string {
	name := ""
	for _, s := range flagSpellings[f] {
		if v.Compare(s.from) >= 0 {
			name = s.name
		}
	}
	return name
}

// RemovedIn37Source is where etcd says 3.7 removed the --experimental-*
// flags: CHANGELOG-3.7, v3.7.0, "Breaking Changes", "Removed all deprecated
// experimental flags", etcd #19959.
const RemovedIn37Source = "https://github.com/etcd-io/etcd/pull/19959"

// RemovedIn37 are the --experimental-* flags etcd 3.7 removed
// (RemovedIn37Source). A 3.7 process given any of them does not start. The
// flag tests check that the spoke never renders one for 3.7.
var RemovedIn37 = []string{
	"experimental-bootstrap-defrag-threshold-megabytes",
	"experimental-compact-hash-check-enabled",
	"experimental-compact-hash-check-time",
	"experimental-compaction-batch-limit",
	"experimental-compaction-sleep-interval",
	"experimental-corrupt-check-time",
	"experimental-distributed-tracing-address",
	"experimental-distributed-tracing-instance-id",
	"experimental-distributed-tracing-sampling-rate",
	"experimental-distributed-tracing-service-name",
	"experimental-downgrade-check-time",
	"experimental-enable-distributed-tracing",
	"experimental-enable-lease-checkpoint",
	"experimental-enable-lease-checkpoint-persist",
	"experimental-initial-corrupt-check",
	"experimental-memory-mlock",
	"experimental-peer-skip-client-san-verification",
	"experimental-snapshot-catchup-entries",
	"experimental-stop-grpc-service-on-defrag",
	"experimental-txn-mode-write-with-shared-buffer",
	"experimental-warning-apply-duration",
	"experimental-warning-unary-request-duration",
	"experimental-watch-progress-notify-interval",
}
