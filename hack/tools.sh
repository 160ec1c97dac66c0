#!/usr/bin/env bash
# Builds the pinned tools into bin/ from the Go module proxy, each only when
# it is missing or reports another version.
#
#   hack/tools.sh                every tool (CI)
#   hack/tools.sh --for demo     what `make demo` runs: kube-apiserver, etcd37 (the demo ring's and
#                                the apiservers' store: dev up runs both on one build), etcdctl
#   hack/tools.sh --for test     what `make test` runs: all but the generators and linters
#   hack/tools.sh --for ci       what .ci/run needs every run: test's, the generators and linters
#   hack/tools.sh --for realnodes  what real nodes run and their tests use (make test-realnodes,
#                                make scenarios|failures|nemesis NODES=real)
#   hack/tools.sh --for realdemo  what `make demo NODES=real` runs: the demo's, kubectl and the
#                                nodes' (no other etcd release, no etcdutl, no versitygw)
#   hack/tools.sh --for kind     kind and what the kind node image holds (hack/kind/node-image.sh)
#   hack/tools.sh TOOL...        those tools, one after the other
#   hack/tools.sh [--for P] --plan  print the two lanes the build would run, build nothing
#   hack/tools.sh [--for P] --missing  print the tools that are missing or of another version, one
#                                a line, build nothing (.ci/run: are the real-node tools cached?)
#
# kubeadm and kind: the kind node image (hack/kind/node-image.sh, make
# kind-image) and the kind scripts (hack/kind).
#
# Tools: kube-apiserver kubectl kubeadm kind etcd etcd35 etcd37 etcdctl etcdutl controller-gen golangci-lint versitygw
# promtool kubelet kube-scheduler kube-controller-manager kube-proxy containerd
# (with ctr and the runc shim) coredns pause (the last seven: real nodes; the
# single name `realnodes` builds them one after the other)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
# The etcd 3.5 release upgrades start from (and downgrades return to):
# bin/etcd-3.5.x, picked by the local node agent for an image tagged with it.
ETCD35_VERSION=v3.5.35
# The etcd 3.7 release (bin/etcd-3.7.x, picked the same way): the new side
# of the 3.6 to 3.7 upgrade and the default of `etcdfed dev up`. The
# supported releases and upgrade steps are pkg/etcdversion's; its tests
# check that these pins are the newest patches it names.
ETCD37_VERSION=v3.7.3
CONTROLLER_TOOLS_VERSION=v0.21.0
GOLANGCI_LINT_VERSION=v2.15.0
# versitygw: an S3-compatible gateway over a directory (posix backend), the
# real S3 server of the backup tests.
VERSITYGW_VERSION=v1.8.0
# promtool: `promtool test rules` on the shipped alerts (config/monitoring).
# The module's v0.3xx.y versions are Prometheus 3.xx.y.
PROMETHEUS_VERSION=v0.316.0
# The local environment's real nodes (etcdfed dev up --nodes real): kubelet,
# kube-scheduler, kube-controller-manager and kube-proxy come from
# KUBE_VERSION above; containerd 2 because kubelet 1.36 refuses 1.x
# (Debian 12 has 1.6); CoreDNS with the plugins a cluster DNS uses
# (hack/tools/coredns). runc and the CNI plugins are Debian's
# (hack/system-deps.sh realnodes).
CONTAINERD_VERSION=v2.2.9
COREDNS_VERSION=v1.14.7
# kind, for hack/kind (the release hack/kind/lib.sh names).
KIND_VERSION=$(sed -n 's/^KIND_VERSION=//p' "$root/hack/kind/lib.sh")

# have NAME WANT CMD...: true when bin/NAME exists and CMD's output holds WANT.
have() {
	local name=$1 want=$2
	shift 2
	local out
	[[ -x "$bin/$name" ]] || return 1
	out=$("$@" 2>/dev/null) || return 1
	[[ $out == *"$want"* ]]
}

# stamped NAME WANT: true when bin/.NAME.stamp, written after NAME's last
# build, holds WANT (for a tool whose version output cannot show it).
stamped() { [[ -f "$bin/.$1.stamp" && $(<"$bin/.$1.stamp") == "$2" ]]; }

# typical NAME: seconds a cold build of NAME took on the project's 2-core
# machine (module downloads included), for the progress line; 0 when not
# known.
typical() {
	case $1 in
	kube-apiserver) echo 540 ;; kubectl) echo 100 ;; etcd) echo 130 ;; etcd35) echo 55 ;; etcd37) echo 130 ;;
	etcdctl | etcdutl) echo 5 ;; controller-gen) echo 50 ;; golangci-lint) echo 170 ;;
	versitygw) echo 180 ;;
	# promtool: 9.2 min of CPU in a cold build measured beside other
	# engineers' runs (27 min of wall time there); about 6 on two free cores.
	promtool) echo 360 ;;
	kubeadm) echo 60 ;; kind) echo 20 ;;
	# After kube-apiserver, whose packages they share (2026-11-26, both
	# caches empty, load 10-19).
	kubelet) echo 95 ;; kube-scheduler) echo 15 ;; kube-controller-manager) echo 50 ;; kube-proxy) echo 25 ;;
	containerd) echo 170 ;; coredns) echo 150 ;;
	*) echo 0 ;;
	esac
}

# step NAME CMD...: build NAME with CMD, saying what is built and, every 30
# seconds while it runs, for how long and roughly how long is left (from
# the typical cold build time; a warm Go cache makes it much shorter).
step() {
	local name=$1 start=$SECONDS typ
	shift
	typ=$(typical "$name")
	if ((typ >= 45)); then
		echo ">> building $name (a cold build takes about $(((typ + 30) / 60)) min on 2 cores)"
	elif ((typ > 0)); then
		echo ">> building $name (under a minute)"
	else
		echo ">> building $name"
	fi
	local cpu
	cpu=$(mktemp)
	# times, in the build's subshell once the build is done: the CPU time
	# (user and system) of everything the build ran.
	("$@" && times >"$cpu") &
	local pid=$!
	while ! wait_for "$pid" 30; do
		local el=$((SECONDS - start)) left=""
		((typ > el)) && left=", about $(((typ - el + 30) / 60)) min left"
		echo ">> still building $name: $((el / 60))m$((el % 60))s$left"
	done
	wait "$pid" || { rm -f "$cpu"; return 1; }
	echo ">> built $name in $((SECONDS - start))s ($(cpu_seconds <"$cpu") CPU-seconds)"
	rm -f "$cpu"
}

# cpu_seconds: the user plus system seconds of the children in bash's
# `times` output (its second line, "1m2.500s 0m3.250s"), rounded.
cpu_seconds() {
	sed -n 2p | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d", t + 0.5 }'
}

# wait_for PID SECONDS: true once PID has exited (within SECONDS), false
# if it still runs.
wait_for() {
	local i
	for ((i = 0; i < $2; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 1
	done
	! kill -0 "$1" 2>/dev/null
}

# No tool is debugged from bin/: the compiler generates no DWARF for it
# (the linker's -w drops it from most anyway), which took 8.5% off a cold
# compile of etcd 3.7 (docs/measurements/first-run.md, 2026-11-29).
nodwarf=-gcflags=all=-dwarf=false

kube_ld() {
	local ld="-s -w" p
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=36"
		ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	echo "$ld"
}
build_kube() { (cd "$root/hack/tools/kube" && go build -trimpath "$nodwarf" -ldflags "$(kube_ld)" -o "$bin/$1" "k8s.io/kubernetes/cmd/$1"); }
build_kube_apiserver() { build_kube kube-apiserver; }
build_kubectl() { build_kube kubectl; }
build_kind() { GOBIN=$bin CGO_ENABLED=0 go install -trimpath "$nodwarf" -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"; }

# The etcd builds carry one local change (internal/resolver: the ring's DNS
# servers from ETCDFED_DNS_SERVERS). Its hash goes into the Git SHA that
# `etcd --version` prints, so a binary built before a change to it is rebuilt.
resolver_sum() { sha256sum "$root/hack/tools/$1/internal/resolver/resolver.go" | cut -c1-12; }
ETCD_SHA="${ETCD_VERSION}+resolver.$(resolver_sum etcd)"
ETCD35_SHA="${ETCD35_VERSION}+resolver.$(resolver_sum etcd35)"
ETCD37_SHA="${ETCD37_VERSION}+resolver.$(resolver_sum etcd37)"
etcd_ld="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_SHA}"
build_etcd() { (cd "$root/hack/tools/etcd" && go build -trimpath "$nodwarf" -ldflags "$etcd_ld" -o "$bin/etcd" ./cmd/etcd); }
build_etcd37() { (cd "$root/hack/tools/etcd37" && go build -trimpath "$nodwarf" -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD37_SHA}" -o "$bin/etcd-${ETCD37_VERSION#v}" ./cmd/etcd); }
build_etcd35() { (cd "$root/hack/tools/etcd35" && go build -trimpath "$nodwarf" -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD35_SHA}" -o "$bin/etcd-${ETCD35_VERSION#v}" ./cmd/etcd); }
# etcdctl's `version` prints no Git SHA: a stamp file records the resolver
# it was built with.
build_etcdctl() {
	(cd "$root/hack/tools/etcd" && go build -trimpath "$nodwarf" -ldflags "$etcd_ld" -o "$bin/etcdctl" ./cmd/etcdctl)
	echo "$ETCD_SHA" >"$bin/.etcdctl.stamp"
}
build_etcdutl() { (cd "$root/hack/tools/etcd" && go build -trimpath "$nodwarf" -ldflags "$etcd_ld" -o "$bin/etcdutl" go.etcd.io/etcd/etcdutl/v3); }
build_controller_gen() { (cd "$root/hack/tools/dev" && go build -trimpath "$nodwarf" -o "$bin/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen); }
build_golangci_lint() {
	(cd "$root/hack/tools/dev" && go build -trimpath "$nodwarf" -ldflags "-X main.version=${GOLANGCI_LINT_VERSION#v}" \
		-o "$bin/golangci-lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
}

build_versitygw() {
	(cd "$root/hack/tools/s3" && go build -trimpath "$nodwarf" -ldflags "-s -w -X main.Version=${VERSITYGW_VERSION} -X main.Build=${VERSITYGW_VERSION} -X main.BuildTime=1970-01-01T00:00:00Z" \
		-o "$bin/versitygw" github.com/versity/versitygw/cmd/versitygw)
}

build_promtool() {
	(cd "$root/hack/tools/prometheus" && go build -trimpath "$nodwarf" -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}" \
		-o "$bin/promtool" github.com/prometheus/prometheus/cmd/promtool)
}

containerd_ld="-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION} -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
# Static (no cgo): without the btrfs, devmapper and zfs snapshotters, which
# need C libraries; the nodes use overlayfs.
build_containerd() {
	(cd "$root/hack/tools/containerd" && CGO_ENABLED=0 go build -trimpath "$nodwarf" -tags "no_btrfs no_devmapper no_zfs" -ldflags "$containerd_ld" -o "$bin/" \
		github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr)
}
build_coredns() {
	(cd "$root/hack/tools/coredns" && CGO_ENABLED=0 go build -trimpath "$nodwarf" -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=${COREDNS_VERSION}" -o "$bin/coredns" .)
}
# pause: the pod sandbox process (hack/tools/pause, in this module); a stamp
# records the hash of its source.
pause_sum() { sha256sum "$root/hack/tools/pause/main.go" | cut -c1-12; }
build_pause() {
	(cd "$root" && CGO_ENABLED=0 go build -trimpath "$nodwarf" -ldflags "-s -w" -o "$bin/pause" ./hack/tools/pause)
	pause_sum >"$bin/.pause.stamp"
}

ensure() {
	case $1 in
	kube-apiserver) have kube-apiserver "Kubernetes $KUBE_VERSION" "$bin/kube-apiserver" --version || step "$1" build_kube_apiserver ;;
	kubectl) have kubectl "Client Version: $KUBE_VERSION" "$bin/kubectl" version --client || step "$1" build_kubectl ;;
	etcd) have etcd "Git SHA: $ETCD_SHA" "$bin/etcd" --version || step "$1" build_etcd ;;
	etcd35) have "etcd-${ETCD35_VERSION#v}" "Git SHA: $ETCD35_SHA" "$bin/etcd-${ETCD35_VERSION#v}" --version || step "$1" build_etcd35 ;;
	etcd37) have "etcd-${ETCD37_VERSION#v}" "Git SHA: $ETCD37_SHA" "$bin/etcd-${ETCD37_VERSION#v}" --version || step "$1" build_etcd37 ;;
	etcdctl) { have etcdctl "etcdctl version: ${ETCD_VERSION#v}" "$bin/etcdctl" version && stamped etcdctl "$ETCD_SHA"; } || step "$1" build_etcdctl ;;
	etcdutl) have etcdutl "etcdutl version: ${ETCD_VERSION#v}" "$bin/etcdutl" version || step "$1" build_etcdutl ;;
	controller-gen) have controller-gen "$CONTROLLER_TOOLS_VERSION" "$bin/controller-gen" --version || step "$1" build_controller_gen ;;
	golangci-lint) have golangci-lint "version ${GOLANGCI_LINT_VERSION#v}" "$bin/golangci-lint" version || step "$1" build_golangci_lint ;;
	versitygw) have versitygw "Version  : $VERSITYGW_VERSION" "$bin/versitygw" --version || step "$1" build_versitygw ;;
	promtool) have promtool "promtool, version ${PROMETHEUS_VERSION#v}" "$bin/promtool" --version || step "$1" build_promtool ;;
	kind) have kind "kind $KIND_VERSION " "$bin/kind" version || step "$1" build_kind ;;
	kubeadm) have kubeadm "$KUBE_VERSION" "$bin/kubeadm" version -o short || step "$1" build_kube "$1" ;;
	kubelet | kube-scheduler | kube-controller-manager | kube-proxy) have "$1" "Kubernetes $KUBE_VERSION" "$bin/$1" --version || step "$1" build_kube "$1" ;;
	containerd)
		{ have containerd " $CONTAINERD_VERSION" "$bin/containerd" --version &&
			have ctr " $CONTAINERD_VERSION" "$bin/ctr" --version &&
			have containerd-shim-runc-v2 " $CONTAINERD_VERSION" "$bin/containerd-shim-runc-v2" -v; } || step "$1" build_containerd ;;
	coredns) have coredns "CoreDNS-${COREDNS_VERSION#v}" "$bin/coredns" -version || step "$1" build_coredns ;;
	pause) { [[ -x "$bin/pause" ]] && stamped pause "$(pause_sum)"; } || step "$1" build_pause ;;
	realnodes) for t in kubelet kube-scheduler kube-controller-manager kube-proxy containerd coredns pause; do ensure "$t"; done ;;
	*) echo "unknown tool $1" >&2; exit 2 ;;
	esac
}

# lane NAME TOOL...: ensure each TOOL in turn, every output line prefixed
# with NAME.
lane() {
	local name=$1
	shift
	(
		set -o pipefail
		for t in "$@"; do ensure "$t"; done 2>&1 | sed -u "s/^/[$name] /"
	)
}

# The tools in groups that build one after the other in one lane, because
# the later ones reuse the first one's compiled packages (kubectl and the
# node binaries after kube-apiserver, etcdctl and etcdutl after etcd,
# golangci-lint after controller-gen).
groups=(
	"kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager kube-proxy"
	"etcd etcdctl etcdutl" etcd35 etcd37 "controller-gen golangci-lint"
	versitygw promtool containerd coredns pause
)
# The tools of each purpose. The demo builds one etcd server: `etcdfed dev
# up` runs its ring and the apiservers' stores on the default release's
# (pkg/etcdversion's test checks it is the default's tool).
declare -A purpose=(
	[demo]="kube-apiserver etcd37 etcdctl"
	[test]="kube-apiserver kubectl etcd etcd35 etcd37 etcdctl etcdutl versitygw promtool"
	[ci]="kube-apiserver kubectl etcd etcd35 etcd37 etcdctl etcdutl versitygw promtool controller-gen golangci-lint"
	[realnodes]="kube-apiserver kubectl etcd etcd35 etcd37 etcdctl etcdutl versitygw kubelet kube-scheduler kube-controller-manager kube-proxy containerd coredns pause"
	[realdemo]="kube-apiserver etcd37 etcdctl kubectl kubelet kube-scheduler kube-controller-manager kube-proxy containerd coredns pause"
	[kind]="kind kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd containerd coredns pause"
)

want=""
if [[ ${1:-} == --for ]]; then
	[[ -n ${purpose[${2:-}]:-} ]] || { echo "tools: --for takes one of: ${!purpose[*]}" >&2; exit 2; }
	want=" ${purpose[$2]} "
	shift 2
fi
plan=""
if [[ ${1:-} == --plan ]]; then
	plan=1
	shift
fi
if [[ ${1:-} == --missing ]]; then
	# ensure's checks, with step saying a tool's name instead of building it.
	step() { echo "$1"; }
	# shellcheck disable=SC2086 # one tool name per word
	for t in ${want:-${groups[*]}}; do ensure "$t"; done
	exit 0
fi
if [[ $# -gt 0 ]]; then
	for t in "$@"; do ensure "$t"; done
	exit 0
fi

# only TOOL...: the tools given that the chosen purpose wants (all without --for).
only() {
	local t
	for t in "$@"; do
		if [[ -z $want || $want == *" $t "* ]]; then echo "$t"; fi
	done
}

# Two lanes side by side, the longest group first: each group, longest
# (by its typical cold build) first, goes to the lane with less work so
# far, so that kube-apiserver, the longest build, starts at once and the
# rest fills the other lane. Each build compiles on both cores itself; the
# second lane keeps them busy while a build waits on its downloads or on
# its single-threaded link.
lanes=("" "")
load=(0 0)
while read -r cost g; do
	[[ -n $g ]] || continue
	l=0
	((load[1] < load[0])) && l=1
	lanes[l]+=" $g"
	load[l]=$((load[l] + cost))
done < <(for g in "${groups[@]}"; do
	# shellcheck disable=SC2086 # one tool name per word
	ts=$(only $g | tr '\n' ' ')
	c=0
	for t in $ts; do c=$((c + $(typical "$t"))); done
	if [[ -n $ts ]]; then echo "$c $ts"; fi
done | sort -s -k1,1nr)

if [[ -n $plan ]]; then
	echo "lane1:${lanes[0]} (typically ${load[0]}s cold)"
	echo "lane2:${lanes[1]} (typically ${load[1]}s cold)"
	exit 0
fi
start=$SECONDS
# shellcheck disable=SC2086 # one tool name per word
lane lane1 ${lanes[0]} &
one=$!
# shellcheck disable=SC2086
lane lane2 ${lanes[1]} &
two=$!
failed=0
wait "$one" || failed=1
wait "$two" || failed=1
[[ $failed == 0 ]] || { echo "tools: a build failed (see above)" >&2; exit 1; }
echo ">> tools ready in $((SECONDS - start))s"
