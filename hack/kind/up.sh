#!/usr/bin/env bash
# Builds etcdfed's topology out of kind clusters on this machine's Docker:
# one hub cluster and N member clusters (member i is zone zone-<i>, or
# zones zone-<i>a and zone-<i>b with --two-zones i), the
# hub installed with `etcdfed hub install`, every member cluster joined
# with `etcdfed cluster join` (the spoke on NodePorts of its node's IP),
# and the sample EtcdCluster (config/samples/etcdcluster.yaml) over them.
#
# Every step inspects what exists and only adds what is missing, so running
# it again after a failure, or after a code change (it rebuilds and reloads
# the image and restarts the hub and spokes when the image changed), is
# safe. docs/kind.md explains each step and what to look at when one fails.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
	cat <<EOF
Usage: hack/kind/up.sh [--members N] [--replicas N] [--workers N] [--two-zones I] [--skip-build] [--no-sample]

  --members N    member clusters, one zone each (default 3)
  --replicas N   etcd members of the sample EtcdCluster: 1, 3, 5, 7 or 9 (default 5)
  --workers N    worker nodes per member cluster besides the control plane (default 0)
  --two-zones I  member cluster I spans two zones, zone-Ia and zone-Ib: its
                 control plane (which then takes pods) in the first, a
                 worker in the second, further --workers alternating
  --skip-build   use the images already in out/images (make images)
  --no-sample    stop before creating the sample EtcdCluster

Environment: ETCDFED_KIND_PREFIX (default etcdfed) prefixes every cluster
name; KIND_NODE_IMAGE picks the kind node image (default: the one
hack/kind/node-image.sh builds here); ETCDFED_KIND_TIMEOUT is how
long to wait for the EtcdCluster's members to be ready and for it to be
Available (default 20m, each); ETCDFED
is the etcdfed CLI to run (default: etcdfed on PATH, else built into bin/).
EOF
}

members=3
replicas=5
workers=0
two_zones=0
build=1
sample=1
while (($# > 0)); do
	case $1 in
	--members) members=${2:?--members needs a number}; shift 2 ;;
	--replicas) replicas=${2:?--replicas needs a number}; shift 2 ;;
	--workers) workers=${2:?--workers needs a number}; shift 2 ;;
	--two-zones) two_zones=${2:?--two-zones needs a member cluster number}; shift 2 ;;
	--skip-build) build=0; shift ;;
	--no-sample) sample=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done
[[ $members =~ ^[1-9][0-9]*$ ]] || die "--members must be a positive number, not '$members'"
[[ $workers =~ ^[0-9]+$ ]] || die "--workers must be a number, not '$workers'"
[[ $two_zones =~ ^[0-9]+$ ]] && ((two_zones <= members)) || die "--two-zones must name a member cluster, 1 to $members, not '$two_zones'"
case $replicas in 1 | 3 | 5 | 7 | 9) ;; *) die "--replicas must be 1, 3, 5, 7 or 9, not '$replicas'" ;; esac
timeout=${ETCDFED_KIND_TIMEOUT:-20m}

need docker kind kubectl awk sed base64 head
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (docker info failed)"
cd "$REPO"
# The etcdfed CLI installs the hub and joins the member clusters.
if [[ -z ${ETCDFED:-} ]]; then
	if command -v etcdfed >/dev/null 2>&1; then
		ETCDFED=etcdfed
	else
		need go
		log "Building the etcdfed CLI into bin/ (or put one on PATH, or set ETCDFED)"
		go build -o bin/etcdfed ./cmd/etcdfed
		ETCDFED=$REPO/bin/etcdfed
	fi
fi

member_names=()
for ((i = 1; i <= members; i++)); do
	member_names+=("${MEMBER_PREFIX}${i}")
done
for m in $(member_clusters); do
	n=${m#"$MEMBER_PREFIX"}
	if ((n > members)); then
		log "warning: member cluster $m exists beyond --members $members; it stays registered in the hub if it was. Run hack/kind/down.sh first to start smaller."
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------------------
if ((build)); then
	# dev/images builds OCI image tarballs without Docker (no registry
	# needed): the all-in-one etcdfed image and the sample's etcd image.
	step "Building $IMAGE and the etcd image (make images IMAGES='etcdfed $SAMPLE_ETCD_IMAGE')"
	need go
	go run ./hack/images build --version dev --out "$IMAGES_DIR" etcdfed "$SAMPLE_ETCD_IMAGE"
fi
# archive NAME: the tarball of image NAME in out/images (images.txt: name,
# reference, file relative to the repository).
archive() { awk -v n="$1" '$1 == n { print $3 }' "$IMAGES_DIR/images.txt" 2>/dev/null; }
archives=()
for n in etcdfed "$SAMPLE_ETCD_IMAGE"; do
	a=$(archive "$n")
	[[ -n $a && $a != /* ]] && a=$REPO/$a
	[[ -n $a && -f $a ]] || die "no $n image in $IMAGES_DIR: run without --skip-build (or make images IMAGES='etcdfed $SAMPLE_ETCD_IMAGE')"
	archives+=("$a")
done
image_id=sha256:$(sha256sum "${archives[0]}" | cut -c1-64)

# The kind node image: KIND_NODE_IMAGE when set (kind pulls it), else the
# one hack/kind/node-image.sh builds here without a registry (cached: it
# returns at once when the image is current).
if [[ -z ${KIND_NODE_IMAGE:-} ]]; then
	KIND_NODE_IMAGE=$(default_node_image)
	step "Kind node image $KIND_NODE_IMAGE (hack/kind/node-image.sh)"
	"$REPO/hack/kind/node-image.sh"
fi

# ---------------------------------------------------------------------------
# create_cluster NAME "ZONE..." WORKERS: a kind cluster of a control plane
# and WORKERS workers, node k labelled topology.kubernetes.io/zone with the
# k-th of the ZONEs, round robin (none when ZONEs is empty). With two zones
# the control plane takes pods too, so that both zones have a node for
# them with one worker.
create_cluster() {
	local name=$1 nworkers=$3
	local -a zones
	read -r -a zones <<<"$2"
	if cluster_exists "$name"; then
		log "Cluster $name exists"
	else
		local cfg=$tmp/$name.yaml
		# labels K: the nodes[] lines that label node K with its zone.
		labels() {
			((${#zones[@]} > 0)) || return 0
			printf '\n  labels:\n    topology.kubernetes.io/zone: %s' "${zones[$(($1 % ${#zones[@]}))]}"
		}
		{
			echo "kind: Cluster"
			echo "apiVersion: kind.x-k8s.io/v1alpha4"
			if [[ $(uname -s) == Linux && $(stat -fc %T /sys/fs/cgroup 2>/dev/null) != cgroup2fs ]]; then
				# Kubelet 1.35 and later refuse a cgroup v1 host unless told
				# otherwise; kind passes the host's cgroups to its nodes.
				printf '%s\n' "kubeadmConfigPatches:" "- |" "  kind: KubeletConfiguration" "  failCgroupV1: false"
			fi
			if caps_missing; then
				# Without CAP_SYS_RESOURCE no process may lower its
				# oom_score_adj: containerd keeps the pods' at or above its
				# own, as kind configures it for rootless nodes.
				printf '%s\n' "containerdConfigPatches:" "- |-" '  [plugins."io.containerd.grpc.v1.cri"]' "    restrict_oom_score_adj = true"
			fi
			echo "nodes:"
			echo "- role: control-plane$(labels 0)"
			local w
			for ((w = 0; w < nworkers; w++)); do
				echo "- role: worker$(labels $((w + 1)))"
			done
		} >"$cfg"
		local args=(create cluster --name "$name" --config "$cfg" --wait 180s --image "$KIND_NODE_IMAGE")
		log "Creating cluster $name${2:+ (zones: $2)}"
		local t0=$SECONDS
		kind "${args[@]}"
		# kind only warns when its wait runs out: a node whose kubelet
		# never started is found here, not minutes later in a Pending pod.
		local registered t1=$SECONDS
		while registered=$(k "$name" get nodes --no-headers 2>/dev/null | wc -l) && ((registered < 1 + nworkers && SECONDS - t1 < 120)); do
			sleep 2
		done
		if ((registered != 1 + nworkers)) || ! k "$name" wait --for=condition=Ready nodes --all --timeout=120s >/dev/null; then
			die "$name: $registered of $((1 + nworkers)) nodes registered, not every one Ready $((SECONDS - t0))s after kind create cluster ($(k "$name" get nodes --no-headers 2>&1 | awk '{ printf "%s %s; ", $1, $2 }')); a node's kubelet says why: docker exec <node> journalctl -u kubelet | tail"
		fi
		log "Cluster $name Ready in $((SECONDS - t0))s (kind create cluster)"
	fi
	if ((${#zones[@]} == 1)); then
		# kind sets the labels at creation; this also fixes a cluster
		# created by hand or by an older kind without nodes[].labels. A
		# node's zone is never changed (a re-run without --two-zones, as
		# restore-zone.sh's, keeps a two-zone cluster's).
		k "$name" label nodes -l '!topology.kubernetes.io/zone' "topology.kubernetes.io/zone=${zones[0]}" >/dev/null
	fi
	if ((${#zones[@]} > 1)) && k "$name" get node "$name-control-plane" -o jsonpath='{.spec.taints[*].key}' | grep -qw node-role.kubernetes.io/control-plane; then
		k "$name" taint nodes "$name-control-plane" node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null
		log "$name: the control plane takes pods (zone ${zones[0]})"
	fi
}

# zones_of I, workers_of I: member cluster I's zones and workers.
zones_of() {
	if (($1 == two_zones)); then echo "zone-${1}a zone-${1}b"; else echo "zone-$1"; fi
}
workers_of() {
	if (($1 == two_zones)); then echo $((workers > 0 ? workers : 1)); else echo "$workers"; fi
}

# Disk: each new node copies the node image's /var (its preloaded images,
# about 0.8 GB) into its own volume and unpacks images as pods start; four
# single-node clusters with the ring took about 10 GB here. Refuse early
# rather than fail in the middle of `kind load` with "no space left on
# device" (docs/kind.md, When it fails).
# About 2.4 GB per node was measured here (10.9 GB for four single-node
# clusters with the ring, the node image included).
NODE_DISK_MB=2560
new_nodes=0
cluster_exists "$HUB" || new_nodes=$((new_nodes + 1))
for i in "${!member_names[@]}"; do
	cluster_exists "${member_names[$i]}" || new_nodes=$((new_nodes + 1 + $(workers_of $((i + 1)))))
done
root_dir=$(docker info -f '{{ .DockerRootDir }}' 2>/dev/null || true)
if ((new_nodes > 0)) && [[ -n $root_dir && -d $root_dir && -z ${ETCDFED_KIND_SKIP_DISK_CHECK:-} ]]; then
	free_mb=$(df -Pm "$root_dir" | awk 'NR == 2 { print $4 }')
	need_mb=$((new_nodes * NODE_DISK_MB))
	if [[ -n $free_mb ]] && ((free_mb < need_mb)); then
		die "$new_nodes new kind nodes need about $((need_mb / 1024)) GB free under Docker's $root_dir, and $((free_mb / 1024)) GB are free: free some (ETCDFED_KIND_SKIP_DISK_CHECK=1 to try anyway)"
	fi
fi

# inotify: each kind node (its systemd, kubelet, containerd and pods) holds
# about 20 inotify instances, all of them root's on this machine (kind's
# nodes run without a user namespace), and Debian allows a user 128: six
# nodes. Past that a node's kubelet exits at start ("Failed to start
# cAdvisor: inotify_init: too many open files"), the node never becomes
# Ready, and kind still reports its cluster created (measured here: the
# seventh node, --workers 1). As root the limits are raised to what kind's
# documentation gives for many nodes (its Known Issues, "Pod errors due to
# too many open files"), with a line saying so; else refuse with the
# commands.
NODE_INOTIFY=24
if ((new_nodes > 0)) && [[ -r /proc/sys/fs/inotify/max_user_instances ]]; then
	inotify_limit=$(cat /proc/sys/fs/inotify/max_user_instances)
	# find fails on processes that end while it reads: counted anyway.
	inotify_used=$({ find /proc/[0-9]*/fd -lname 'anon_inode:inotify' 2>/dev/null || true; } | wc -l)
	inotify_need=$((inotify_used + new_nodes * NODE_INOTIFY))
	if ((inotify_need > inotify_limit)); then
		inotify_to=$((inotify_need > 512 ? inotify_need : 512))
		watches=$(cat /proc/sys/fs/inotify/max_user_watches)
		watches_to=$((watches > 524288 ? watches : 524288))
		if ((EUID != 0)); then
			die "$new_nodes new kind nodes need about $inotify_need inotify instances ($inotify_used in use, $NODE_INOTIFY a node) and root may hold $inotify_limit: as root, sysctl -w fs.inotify.max_user_instances=$inotify_to fs.inotify.max_user_watches=$watches_to"
		fi
		sysctl -qw "fs.inotify.max_user_instances=$inotify_to" "fs.inotify.max_user_watches=$watches_to"
		log "Raised fs.inotify.max_user_instances from $inotify_limit to $inotify_to and fs.inotify.max_user_watches from $watches to $watches_to: $new_nodes new kind nodes need about $inotify_need instances ($inotify_used in use); to set them back: sysctl -w fs.inotify.max_user_instances=$inotify_limit fs.inotify.max_user_watches=$watches"
	fi
fi

# The docker network "kind", created here before kind would: kind lets
# Docker choose its IPv4 subnet, and Docker reconnects a container at a
# given address only on a network whose subnet was configured, which
# fail-zone.sh --cut and restore-zone.sh need (a node back at another
# address has an apiserver certificate for the old one). The subnet is the
# first 172.N.0.0/16 (N 18 to 31, Docker's own choices) that no docker
# network and no route of this machine uses. A network "kind" that exists
# is used as it is.
ensure_kind_network() {
	docker network inspect kind >/dev/null 2>&1 && return
	local used n subnet=""
	# shellcheck disable=SC2046 # one argument per network ID
	used=$(
		docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' $(docker network ls -q) 2>/dev/null || true
		ip -4 route show 2>/dev/null | awk '{ print $1 }' || true
	)
	for n in $(seq 18 31); do
		if ! grep -q "172\.$n\." <<<"$used"; then
			subnet=172.$n.0.0/16
			break
		fi
	done
	if [[ -z $subnet ]]; then
		log "warning: no free 172.N.0.0/16 for the docker network kind; kind creates it (a node cut by fail-zone.sh --cut comes back at a new address)"
		return
	fi
	docker network create -d bridge -o com.docker.network.bridge.enable_ip_masquerade=true \
		-o com.docker.network.driver.mtu=1500 --subnet "$subnet" kind >/dev/null
	log "Created the docker network kind ($subnet)"
}

step "Creating kind clusters: $HUB and ${member_names[*]}"
ensure_kind_network
create_cluster "$HUB" "" 0
for i in "${!member_names[@]}"; do
	create_cluster "${member_names[$i]}" "$(zones_of $((i + 1)))" "$(workers_of $((i + 1)))"
done

step "Loading $IMAGE and the etcd image into every cluster (kind load image-archive)"
for c in "$HUB" "${member_names[@]}"; do
	for a in "${archives[@]}"; do
		kind load image-archive "$a" --name "$c"
	done
done

# restart_on_new_image CLUSTER DEPLOYMENT: a new image under the same tag
# does not restart running pods; stamping its ID into the pod template does,
# once per image.
restart_on_new_image() {
	k "$1" -n "$NS" patch deployment "$2" --type merge \
		-p "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"etcdfed.dev/image-id\":\"$image_id\"}}}}}" >/dev/null
}

# ---------------------------------------------------------------------------
# The hub: CRDs, namespace, RBAC, Deployment with the kind image, the ring's
# gossip key, and its RoleBinding in the sample EtcdCluster's namespace.
step "Installing the hub in $HUB (etcdfed hub install)"
"$ETCDFED" hub install --context "$(ctx "$HUB")" --image "$IMAGE" --etcdcluster-namespace "$EC_NAMESPACE"
restart_on_new_image "$HUB" etcdfed-hub

# Each member cluster: CRDs, ring namespace, the hub's least-privilege
# ServiceAccount and a short-lived token of it registered in the hub (which
# renews it), the gossip key, and the spoke with DNS and gossip on NodePorts
# 30053 and 30946 of its node's IP. The hub reaches the member apiserver at
# its address on the docker network "kind" (kind get kubeconfig
# --internal); this machine at 127.0.0.1.
for m in "${member_names[@]}"; do
	step "Joining $m (etcdfed cluster join)"
	kind get kubeconfig --name "$m" >"$tmp/kubeconfig.$m"
	server=$(kind get kubeconfig --internal --name "$m" | awk '$1 == "server:" { print $2; exit }')
	[[ -n $server ]] || die "no internal apiserver address for $m"
	# All kind clusters share one host: the lan gossip profile detects a
	# stopped spoke in about 5s instead of wan's 30-40s.
	"$ETCDFED" cluster join "$m" --context "$(ctx "$HUB")" \
		--kubeconfig-member "$tmp/kubeconfig.$m" --member-server "$server" \
		--image "$IMAGE" --spoke-expose NodePort --gossip-profile lan
	restart_on_new_image "$m" etcdfed-spoke
done

# ---------------------------------------------------------------------------
step "Waiting for the spokes' DNS addresses"
spoke_dns() {
	k "$1" -n "$NS" get etcdspokes.etcdfed.dev spoke -o jsonpath='{.status.dnsAddresses[*]}'
}
has_spoke_dns() { [[ -n $(spoke_dns "$1") ]]; }
dns_of=() # dns_of[i]: the DNS addresses of member_names[i]'s spoke
for i in "${!member_names[@]}"; do
	m=${member_names[$i]}
	wait_until 180 "the spoke of $m to publish its DNS address (EtcdSpoke status.dnsAddresses)" has_spoke_dns "$m"
	dns_of[i]=$(spoke_dns "$m")
	log "$m: spoke DNS at ${dns_of[$i]}"
done

# ---------------------------------------------------------------------------
# coredns_forward CLUSTER POLICY UPSTREAM...: a server block in CoreDNS's
# Corefile that forwards the ring's domain to UPSTREAMs, between marker
# comments so a re-run replaces it. CoreDNS is restarted only on a change.
coredns_forward() {
	local c=$1 policy=$2
	shift 2
	local cur=$tmp/Corefile.$c.cur new=$tmp/Corefile.$c.new
	k "$c" -n kube-system get configmap coredns -o jsonpath='{.data.Corefile}' >"$cur"
	{
		awk '/^# etcdfed BEGIN/ { skip = 1 } !skip { print } /^# etcdfed END/ { skip = 0 }' "$cur" | trim_trailing_blank_lines
		cat <<EOF

# etcdfed BEGIN: the ring's domain, served by the spokes (hack/kind/up.sh)
${RING_DOMAIN}:53 {
    errors
    cache 5
    forward . $* {
        policy ${policy}
    }
}
# etcdfed END
EOF
	} >"$new"
	if cmp -s <(trim_trailing_blank_lines <"$cur") <(trim_trailing_blank_lines <"$new"); then
		log "$c: CoreDNS already forwards ${RING_DOMAIN} to $*"
		return
	fi
	{
		printf 'data:\n  Corefile: |\n'
		sed 's/^/    /' "$new"
	} >"$tmp/coredns-patch.$c.yaml"
	k "$c" -n kube-system patch configmap coredns --type merge --patch-file "$tmp/coredns-patch.$c.yaml" >/dev/null
	k "$c" -n kube-system rollout restart deployment/coredns >/dev/null
	k "$c" -n kube-system rollout status deployment/coredns --timeout=3m
	log "$c: CoreDNS forwards ${RING_DOMAIN} to $*"
}

step "Forwarding ${RING_DOMAIN} from every cluster's CoreDNS to the spokes"
all_dns=()
for i in "${!member_names[@]}"; do
	# shellcheck disable=SC2206 # the addresses are split on spaces on purpose
	all_dns+=(${dns_of[$i]})
done
for i in "${!member_names[@]}"; do
	m=${member_names[$i]}
	# This cluster's own spoke first (its ClusterIP), then the others, so
	# names resolve while the local spoke or any one other cluster is down.
	ip=$(k "$m" -n "$NS" get service etcdfed-spoke -o jsonpath='{.spec.clusterIP}')
	upstreams=("$ip:53")
	for j in "${!member_names[@]}"; do
		((j == i)) && continue
		# shellcheck disable=SC2206
		upstreams+=(${dns_of[$j]})
	done
	coredns_forward "$m" sequential "${upstreams[@]}"
done
coredns_forward "$HUB" random "${all_dns[@]}"

if ((!sample)); then
	step "Done (no sample). Create an EtcdCluster with: kubectl --context $(ctx "$HUB") apply -f config/samples/etcdcluster.yaml"
	exit 0
fi

# ---------------------------------------------------------------------------
step "Creating EtcdCluster $EC_NAMESPACE/$EC_NAME ($replicas members over ${#member_names[@]} zones)"
sed -e "s/^  replicas: [0-9]*\$/  replicas: $replicas/" config/samples/etcdcluster.yaml | k "$HUB" apply -f -
log "Waiting up to $timeout for its $replicas members to be ready and for it to be Available (the first run pulls the etcd image on every node)"
t0=$SECONDS
# Available alone is a quorum: on kind the sample turned Available with 3
# of its 5 members ready, in two of the three zones, the others still
# starting. The ring is up once every member is ready (status.readyMembers)
# and it is Available.
if ! k "$HUB" -n "$EC_NAMESPACE" wait --for=jsonpath='{.status.readyMembers}'="$replicas" "etcdclusters.etcdfed.dev/$EC_NAME" --timeout="$timeout" ||
	! k "$HUB" -n "$EC_NAMESPACE" wait --for=condition=Available "etcdclusters.etcdfed.dev/$EC_NAME" --timeout="$timeout"; then
	log ""
	log "The EtcdCluster is not Available with $replicas ready members yet. Its status:"
	k "$HUB" -n "$EC_NAMESPACE" get etcdclusters.etcdfed.dev "$EC_NAME" -o yaml >&2 || true
	log "The member objects and pods of each member cluster:"
	for m in "${member_names[@]}"; do
		log "--- $m"
		k "$m" -n "$NS" get etcdmembers.etcdfed.dev,pods,services,pvc -o wide >&2 || true
	done
	log "The hub's log: kubectl --context $(ctx "$HUB") -n $NS logs deploy/etcdfed-hub"
	log "docs/kind.md, 'When it fails', says what to look at next; running this script again resumes."
	exit 1
fi

step "Ready: $EC_NAMESPACE/$EC_NAME Available with $replicas ready members $((SECONDS - t0))s after its creation"
k "$HUB" get etcdclusters.etcdfed.dev -A -o wide
cat >&2 <<EOF

etcdctl (a pod in the hub cluster, with a client certificate from
'etcdfed client-cert'):
  hack/kind/etcdctl.sh member list -w table
  hack/kind/etcdctl.sh put hello world
  hack/kind/etcdctl.sh endpoint status -w table

Status:      kubectl --context $(ctx "$HUB") get etcdcluster -A -o wide
Zone drill:  hack/kind/fail-zone.sh ${member_names[0]}; hack/kind/restore-zone.sh ${member_names[0]}
Tear down:   hack/kind/down.sh
EOF
