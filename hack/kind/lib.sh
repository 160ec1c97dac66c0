# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this file
# Shared by the hack/kind scripts: names, logging, waiting. Sourced, never
# run. Every name derives from ETCDFED_KIND_PREFIX (default "etcdfed"):
#   <prefix>-hub          the hub cluster (kubectl context kind-<prefix>-hub)
#   <prefix>-member-<i>   member cluster i, zone zone-<i>

ETCDFED_KIND_PREFIX=${ETCDFED_KIND_PREFIX:-etcdfed}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The image up.sh installs the hub and the spokes with: `make images`'s
# all-in-one etcdfed image (dev/images' catalog), loaded into every cluster
# from out/images with `kind load image-archive`.
IMAGE=ghcr.io/etcdfed/etcdfed:dev
IMAGES_DIR=${ETCDFED_KIND_IMAGES_DIR:-$REPO/out/images}
# The ring namespace in member clusters and the hub's namespace in the hub.
NS=etcdfed-system
HUB=${ETCDFED_KIND_PREFIX}-hub
MEMBER_PREFIX=${ETCDFED_KIND_PREFIX}-member-
# The sample EtcdCluster (config/samples/etcdcluster.yaml).
EC_NAME=main
EC_NAMESPACE=default
RING_DOMAIN=etcd.kind.local
# The sample's etcd image (its spec.version, dev/images' etcd-<minor>).
SAMPLE_ETCD_IMAGE=etcd-3.7
# CUT_DIR: where fail-zone.sh --cut writes the address each node it cut
# off the docker network kind had, so restore-zone.sh reconnects it there.
CUT_DIR=${ETCDFED_KIND_STATE_DIR:-$REPO/out/kind}/cut
# The kind release the scripts are written and checked against
# (hack/tools.sh kind builds it into bin/), and whose node image layout
# node-image.sh follows.
KIND_VERSION=v0.33.0

# default_node_image: the node image node-image.sh builds and the scripts
# use unless KIND_NODE_IMAGE says otherwise: the Kubernetes version
# hack/tools.sh pins.
default_node_image() {
	printf 'etcdfed/kind-node:%s' "$(sed -n 's/^KUBE_VERSION=//p' "$REPO/hack/tools.sh")"
}

log() { printf '%s\n' "$*" >&2; }
step() { printf '\n==> %s\n' "$*" >&2; }
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# need CMD...: fail early, naming the missing tools.
need() {
	local missing=()
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || missing+=("$c")
	done
	((${#missing[@]} == 0)) || die "missing on PATH: ${missing[*]} (see docs/kind.md, Prerequisites)"
}

# caps_missing: true on a Linux host whose capability bounding set lacks
# capabilities the kernel knows (seen on a Firecracker VM without
# CAP_SYS_RESOURCE): Docker's privileged containers then need
# hack/kind/runc-caps.sh (dockerd.sh), and the nodes' containerd must not
# lower a pod's oom_score_adj below its own (up.sh).
caps_missing() {
	[[ $(uname -s) == Linux && -r /proc/self/status ]] || return 1
	local bnd last
	bnd=$((16#$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)))
	last=$(cat /proc/sys/kernel/cap_last_cap 2>/dev/null || echo 40)
	((bnd != (1 << (last + 1)) - 1))
}

ctx() { printf 'kind-%s' "$1"; }

# k CLUSTER ARGS...: kubectl against one kind cluster.
k() {
	local c=$1
	shift
	kubectl --context "$(ctx "$c")" "$@"
}

# kind_clusters: every kind cluster of this prefix, one a line.
kind_clusters() {
	kind get clusters 2>/dev/null | grep -E "^${ETCDFED_KIND_PREFIX}-(hub|member-[0-9]+)\$" || true
}

# member_clusters: the existing member clusters, in numeric order.
member_clusters() {
	kind_clusters | grep -E "^${MEMBER_PREFIX}[0-9]+\$" |
		awk -v p="$MEMBER_PREFIX" '{ print substr($0, length(p) + 1), $0 }' | sort -n | cut -d' ' -f2 || true
}

# kind_ip NODE: the node's IPv4 address on the docker network kind; empty
# when it is not connected to it (cut off by fail-zone.sh --cut).
kind_ip() { docker inspect -f '{{with index .NetworkSettings.Networks "kind"}}{{.IPAddress}}{{end}}' "$1"; }

cluster_exists() { kind_clusters | grep -qx -- "$1"; }

# nodes CLUSTER: the node containers of a kind cluster.
nodes() { kind get nodes --name "$1" 2>/dev/null; }

# wait_until SECONDS WHAT CMD...: run CMD every second until it succeeds.
wait_until() {
	local timeout=$1 what=$2
	shift 2
	local deadline=$((SECONDS + timeout))
	log "Waiting for ${what} (up to ${timeout}s)"
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			log "Timed out after ${timeout}s waiting for ${what}"
			return 1
		fi
		sleep 1
	done
}

# trim_trailing_blank_lines: stdin without blank lines at its end, and
# with a final newline.
trim_trailing_blank_lines() {
	awk '{ l[NR] = $0 } END { n = NR; while (n > 0 && l[n] ~ /^[[:space:]]*$/) n--; for (i = 1; i <= n; i++) print l[i] }'
}

# b64dec: base64 decoding on GNU and BSD/macOS alike.
b64dec() {
	if base64 --help 2>&1 | grep -q -- '--decode'; then
		base64 --decode
	else
		base64 -D
	fi
}

# b64enc: base64 on one line.
b64enc() { base64 | tr -d '\n'; }
