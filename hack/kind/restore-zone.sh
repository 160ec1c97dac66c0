#!/usr/bin/env bash
# Brings back the zone(s) hack/kind/fail-zone.sh failed: unpauses paused
# nodes, starts stopped ones, reconnects cut ones to the docker network kind
# at the address they had. Without an argument, every member cluster.
#
# A stopped node may come back with a new address on the docker network.
# The addresses the spokes advertise follow by themselves (their pods
# restart and read the node's IP again), but the CoreDNS forwards that
# hack/kind/up.sh wrote name the old ones: after a --stop drill this script
# runs `hack/kind/up.sh --skip-build` again, which rewrites them (and changes
# nothing else).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case ${1:-} in
-h | --help)
	echo "Usage: hack/kind/restore-zone.sh [CLUSTER]   (default: every member cluster)"
	exit 0
	;;
esac
need docker kind kubectl
if (($# > 0)); then
	member_clusters | grep -qx -- "$1" || die "no member cluster named $1 (have: $(member_clusters | tr '\n' ' '))"
	clusters=$1
else
	clusters=$(member_clusters)
fi

started=0
# reconnect NODE: a node fail-zone.sh --cut cut off goes back on the docker
# network kind at the address it had. Docker takes a given address only on
# a network whose subnet was configured (up.sh creates it so); on another,
# the node gets a new address, and the steps of up.sh that depend on it run
# again below, as after a stop.
reconnect() {
	local n=$1 ip=""
	[[ -f $CUT_DIR/$n ]] && ip=$(<"$CUT_DIR/$n")
	if [[ -n $ip ]] && docker network connect --ip "$ip" kind "$n"; then
		log "Reconnected $n to the docker network kind at $ip"
	else
		docker network connect kind "$n"
		started=1
		log "Reconnected $n to the docker network kind at $(kind_ip "$n")${ip:+ (it had $ip)}"
	fi
	rm -f "$CUT_DIR/$n"
}
for c in $clusters; do
	for n in $(nodes "$c"); do
		case $(docker inspect -f '{{.State.Status}}' "$n") in
		paused) docker unpause "$n" >/dev/null; log "Unpaused $n" ;;
		exited | created) docker start "$n" >/dev/null; started=1; log "Started $n" ;;
		running) log "$n is running" ;;
		*) die "$n is $(docker inspect -f '{{.State.Status}}' "$n"); start it by hand" ;;
		esac
		[[ -n $(kind_ip "$n") ]] || reconnect "$n"
	done
	wait_until 300 "the apiserver of $c" k "$c" get --raw /readyz
done

if ((started)); then
	step "Nodes were restarted or came back at new addresses: re-running hack/kind/up.sh to refresh addresses"
	members=$(member_clusters | wc -l | tr -d ' ')
	replicas=$(k "$HUB" -n "$EC_NAMESPACE" get etcdclusters.etcdfed.dev "$EC_NAME" -o jsonpath='{.spec.replicas}' 2>/dev/null || true)
	args=(--skip-build --members "$members")
	if [[ -n $replicas ]]; then
		args+=(--replicas "$replicas")
	else
		args+=(--no-sample)
	fi
	"$(dirname "${BASH_SOURCE[0]}")/up.sh" "${args[@]}"
fi
log "Restored. kubectl --context $(ctx "$HUB") get etcdcluster -A -o wide -w"
