#!/usr/bin/env bash
# The hub scale benchmark before and after the scale fixes, in one run on
# this machine: BenchmarkHubScale (test/multicluster) of the commit BEFORE
# (default a4959c0, the benchmark before any fix), then of this tree, for
# the same ring counts, merged into one markdown table by hack/scalecompare
# (a row per figure; per ring count, before and after side by side).
#
# The before side runs in a temporary `git worktree` outside the repository
# (removed afterwards). Both sides use this tree's tools in bin/
# (kube-apiserver, etcd, ...) through ETCDFED_BIN_DIR, so only etcdfed's
# own code differs: each side's test builds its hub, spoke and etcdfed from
# its own checkout. Nothing of the before tree's hack/tools.sh runs.
#
# Environment (defaults):
#   BEFORE=a4959c0         commit to compare against
#   SCALE_RINGS=10,25,50   ring counts, both sides
#   AFTER_EXTRA_RINGS=     more ring counts for this tree only (e.g. 100)
#   SCALE_REST=30s         window at rest per ring count
#   BENCH_TIMEOUT=90m      go test -timeout per side
#   OUT=out/bench-scale-compare.md   the report; the two go test logs are
#                          kept beside it (<OUT without .md>.before.log, .after.log)
#   ETCDFED_BIN_DIR=bin/   the tools both sides use
#
# A side that fails (a ring count the machine cannot hold) keeps the sizes
# it measured; the report says which side failed. The machine's load average
# is sampled every 15 s during each side and reported with the table.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=${BEFORE:-a4959c0}
SCALE_RINGS=${SCALE_RINGS:-10,25,50}
AFTER_EXTRA_RINGS=${AFTER_EXTRA_RINGS:-}
SCALE_REST=${SCALE_REST:-30s}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-90m}
OUT=${OUT:-$root/out/bench-scale-compare.md}
bin=${ETCDFED_BIN_DIR:-$root/bin}

for b in kube-apiserver etcd; do
	if [[ ! -x $bin/$b ]]; then
		echo "bench-scale-compare: $bin/$b missing: run make tools" >&2
		exit 1
	fi
done
before_rev=$(git -C "$root" rev-parse --verify "$BEFORE^{commit}")
after_rev=$(git -C "$root" rev-parse HEAD)
after_desc=$(git -C "$root" describe --always --dirty)
after_rings=$SCALE_RINGS${AFTER_EXTRA_RINGS:+,$AFTER_EXTRA_RINGS}
mkdir -p "$(dirname "$OUT")"
logs=${OUT%.md}

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-scale-compare.XXXXXX")
tree=$work/before
sampler=
cleanup() {
	if [[ -n $sampler ]]; then
		kill "$sampler" 2>/dev/null || true
		wait "$sampler" 2>/dev/null || true
	fi
	if [[ -d $tree ]]; then
		git -C "$root" worktree remove --force "$tree" || echo "bench-scale-compare: could not remove the worktree $tree" >&2
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo ">> worktree of $BEFORE ($before_rev) in $tree"
git -C "$root" worktree add --detach "$tree" "$before_rev" >/dev/null
if ! grep -q 'func BenchmarkHubScale' "$tree/test/multicluster/scale_bench_test.go" 2>/dev/null; then
	echo "bench-scale-compare: $BEFORE has no BenchmarkHubScale in test/multicluster/scale_bench_test.go" >&2
	exit 1
fi

# What a side's EtcdMember status column counts: the first benchmark
# reported patches per minute over all members, later ones per member.
status_mode() {
	if grep -q 'EtcdMember status/min' "$1/test/multicluster/scale_bench_test.go"; then
		echo total
	else
		echo per-member
	fi
}

# load_summary FILE: mean and max of the 1-minute load averages sampled.
load_summary() {
	awk '{ s += $1; if ($1 > m) m = $1; n++ } END { if (n) printf "mean %.1f, max %.1f (%d samples)", s / n, m, n; else print "not sampled" }' "$1"
}

# samples DIR: how many spec changes per ring count DIR's benchmark makes.
samples() {
	if grep -q 'ETCDFED_SCALE_SAMPLES' "$1/test/multicluster/scale_bench_test.go"; then
		echo "${ETCDFED_SCALE_SAMPLES:-20}, each on a ring at rest"
	else
		echo 10
	fi
}

declare -A started ended load result

# side NAME DIR RINGS: run BenchmarkHubScale of DIR, its log in $work/NAME.log.
side() {
	local name=$1 dir=$2 rings=$3 rc=0
	echo ">> $name: BenchmarkHubScale of $dir, rings $rings"
	: >"$work/$name.load"
	(while :; do
		cut -d' ' -f1 /proc/loadavg >>"$work/$name.load"
		sleep 15
	done) &
	sampler=$!
	started[$name]=$(date -u +'%Y-%m-%d %H:%M:%S')
	(cd "$dir" && ETCDFED_BIN_DIR="$bin" ETCDFED_SCALE_RINGS="$rings" ETCDFED_SCALE_REST="$SCALE_REST" \
		go test -count=1 -run '^$' -bench 'BenchmarkHubScale$' -benchtime 1x -timeout "$BENCH_TIMEOUT" -v ./test/multicluster) \
		>"$work/$name.log" 2>&1 || rc=$?
	ended[$name]=$(date -u +'%H:%M:%S')
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	sampler=
	load[$name]=$(load_summary "$work/$name.load")
	cp "$work/$name.log" "$logs.$name.log"
	grep -E 'scale_bench_test\.go:[0-9]+: [0-9]+ rings: ' "$work/$name.log" || true
	if [[ $rc -eq 0 ]]; then
		result[$name]="passed"
	else
		result[$name]="failed (go test exit $rc; the sizes it measured are kept; log $logs.$name.log)"
		echo ">> $name failed (exit $rc); last lines:"
		tail -n 20 "$work/$name.log"
	fi
}

side before "$tree" "$SCALE_RINGS"
before_status=$(status_mode "$tree")
tree_samples=$work/before-bench
mkdir -p "$tree_samples/test/multicluster"
cp "$tree/test/multicluster/scale_bench_test.go" "$tree_samples/test/multicluster/"
before_subject=$(git -C "$root" log -1 --format=%s "$before_rev")
git -C "$root" worktree remove --force "$tree"
side after "$root" "$after_rings"

table=$(cd "$root" && go run ./hack/scalecompare -before "$work/before.log" -after "$work/after.log" \
	-before-status "$before_status" -after-status "$(status_mode "$root")") ||
	table="No table: neither side measured a ring count (logs: $logs.before.log, $logs.after.log)."
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
{
	echo "# BenchmarkHubScale before and after the scale fixes, one run"
	echo
	echo "- before: ${before_rev:0:7} ($before_subject), in a temporary worktree"
	echo "- after: ${after_rev:0:7} ($after_desc), this tree"
	echo "- machine: $(nproc) cores ($cpu), $(uname -sr), shared with other work"
	echo "- before side: ${started[before]} to ${ended[before]} UTC, load average (1 min) ${load[before]}, rings $SCALE_RINGS: ${result[before]}"
	echo "- after side: ${started[after]} to ${ended[after]} UTC, load average (1 min) ${load[after]}, rings $after_rings: ${result[after]}"
	echo "- at rest = a $SCALE_REST window after all rings are Available; latency = spec changes, one ring at a time, to its EtcdMember updated in its member cluster ($(samples "$tree_samples") per ring count before, $(samples "$root") after)"
	if [[ $before_status == total ]]; then
		echo "- the before benchmark counted EtcdMember status patches over all members; divided here by the member count (rings + 2 x min(rings, 3))"
	fi
	echo "- — : that side did not measure this ring count"
	echo
	echo "$table"
	# The after benchmark's count of etcd clients held after a longer rest.
	idle=$(grep -E 'After .* more at rest with' "$work/after.log" | head -1 | sed 's/^[[:space:]]*//')
	if [[ -n $idle ]]; then
		echo
		echo "After side: $idle"
	fi
} >"$OUT"
echo ">> report in $OUT"
cat "$OUT"
[[ ${result[before]} == passed && ${result[after]} == passed ]]
