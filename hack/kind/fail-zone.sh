#!/usr/bin/env bash
# Fails a whole zone on purpose: every node of one member cluster (one zone
# per member cluster in hack/kind) stops answering, its apiserver, spoke and
# etcd members with it.
#
#   pause (default)  docker pause: processes frozen, addresses kept. To the
#                    rest of the ring this looks like a zone cut off the
#                    network; hack/kind/restore-zone.sh resumes it as it was.
#   --stop           docker stop: the zone powers off. On restart Docker may
#                    give the nodes new addresses; restore-zone.sh then
#                    re-runs the address-dependent steps of up.sh.
#   --cut            docker network disconnect: the zone's processes run on,
#                    cut off from every other cluster and from this machine
#                    (a partition; its members lose their quorum, and find
#                    on the heal that the hub replaced them).
#                    restore-zone.sh reconnects each node at the address it
#                    had (kept in out/kind/cut/).
#
# Watch the hub react: the spoke's Lease goes stale on the hub's clock, the
# other spokes' gossip sees the spoke dead, and after the EtcdCluster's
# zoneGracePeriod (1m in the sample) the hub moves the zone's members, one at
# a time, to the remaining zones.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { echo "Usage: hack/kind/fail-zone.sh CLUSTER [--stop | --cut]   (CLUSTER: one of $(member_clusters | tr '\n' ' '))"; }

mode=pause
cluster=""
while (($# > 0)); do
	case $1 in
	--stop) mode=stop; shift ;;
	--cut) mode=cut; shift ;;
	-h | --help) usage; exit 0 ;;
	-*) usage >&2; die "unknown argument: $1" ;;
	*) [[ -z $cluster ]] || die "one cluster at a time"; cluster=$1; shift ;;
	esac
done
need docker kind
[[ -n $cluster ]] || { usage >&2; exit 1; }
[[ $cluster != "$HUB" ]] || die "$HUB is the hub cluster, not a zone; fail a member cluster"
member_clusters | grep -qx -- "$cluster" || die "no member cluster named $cluster (have: $(member_clusters | tr '\n' ' '))"

for n in $(nodes "$cluster"); do
	state=$(docker inspect -f '{{.State.Status}}' "$n")
	case $mode:$state in
	pause:running) docker pause "$n" >/dev/null; log "Paused $n" ;;
	pause:paused) log "$n is already paused" ;;
	stop:running | stop:paused)
		[[ $state == paused ]] && docker unpause "$n" >/dev/null
		docker stop "$n" >/dev/null
		log "Stopped $n"
		;;
	stop:exited) log "$n is already stopped" ;;
	cut:running)
		ip=$(kind_ip "$n")
		if [[ -z $ip ]]; then
			log "$n is already cut off"
			continue
		fi
		mkdir -p "$CUT_DIR"
		echo "$ip" >"$CUT_DIR/$n"
		docker network disconnect kind "$n"
		log "Cut $n off the docker network kind (its address was $ip)"
		;;
	*) die "$n is $state; cannot $mode it" ;;
	esac
done
cat >&2 <<EOF

Zone of $cluster is down ($mode). Watch:
  kubectl --context $(ctx "$HUB") get etcdcluster -A -o wide -w
  kubectl --context $(ctx "$HUB") -n $EC_NAMESPACE get events --field-selector involvedObject.name=$EC_NAME -w
  hack/kind/etcdctl.sh endpoint status -w table
Bring it back: hack/kind/restore-zone.sh $cluster
EOF
