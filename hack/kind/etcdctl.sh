#!/usr/bin/env bash
# Runs etcdctl against the sample EtcdCluster from a throwaway pod in the hub
# cluster (whose CoreDNS resolves the members' names, see up.sh), with a
# fresh client certificate from `etcdfed client-cert`.
#
#   hack/kind/etcdctl.sh                       member list -w table
#   hack/kind/etcdctl.sh put hello world
#   hack/kind/etcdctl.sh get hello
#   hack/kind/etcdctl.sh endpoint status -w table
#
# The certificate is issued with the `etcdfed` CLI: $ETCDFED, else etcdfed
# on PATH, else bin/etcdfed (up.sh builds it there, and so does this
# script when it is missing). It lands in the Secret <name>-etcdctl next to the
# EtcdCluster, which the pod mounts.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case ${1:-} in
-h | --help)
	sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac
(($# > 0)) || set -- member list -w table
need kubectl kind
cluster_exists "$HUB" || die "no hub cluster $HUB: run hack/kind/up.sh first"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/certs"

ec() { k "$HUB" -n "$EC_NAMESPACE" get etcdclusters.etcdfed.dev "$EC_NAME" -o jsonpath="$1"; }
endpoints=$(ec '{.status.endpoints[*]}' | tr ' ' ',')
[[ -n $endpoints ]] || die "EtcdCluster $EC_NAMESPACE/$EC_NAME has no endpoints yet: kubectl --context $(ctx "$HUB") get etcdcluster -A -o wide"
image=$(ec '{.spec.image}')
if [[ -z $image ]]; then
	image=gcr.io/etcd-development/etcd:v$(ec '{.spec.version}')
fi

etcdfed=${ETCDFED:-}
if [[ -z $etcdfed ]]; then
	if command -v etcdfed >/dev/null 2>&1; then
		etcdfed=etcdfed
	elif [[ -x $REPO/bin/etcdfed ]]; then
		etcdfed=$REPO/bin/etcdfed # up.sh builds it there
	fi
fi
if [[ -n $etcdfed ]]; then
	"$etcdfed" client-cert "$EC_NAME" -n "$EC_NAMESPACE" --context "$(ctx "$HUB")" --out "$tmp/certs" >/dev/null
else
	need go
	log "Building the etcdfed CLI into bin/ (or put one on PATH, or set ETCDFED)"
	(cd "$REPO" && go build -o bin/etcdfed ./cmd/etcdfed)
	"$REPO/bin/etcdfed" client-cert "$EC_NAME" -n "$EC_NAMESPACE" --context "$(ctx "$HUB")" --out "$tmp/certs" >/dev/null
fi
k "$HUB" -n "$EC_NAMESPACE" create secret generic "$EC_NAME-etcdctl" \
	--from-file=ca.crt="$tmp/certs/ca.crt" --from-file=client.crt="$tmp/certs/client.crt" --from-file=client.key="$tmp/certs/client.key" \
	--dry-run=client -o yaml | k "$HUB" apply -f - >/dev/null

pod=etcdctl
overrides=$(
	cat <<EOF
{"apiVersion": "v1", "spec": {
  "containers": [{
    "name": "$pod",
    "env": [
      {"name": "ETCDCTL_ENDPOINTS", "value": "$endpoints"},
      {"name": "ETCDCTL_CACERT", "value": "/certs/ca.crt"},
      {"name": "ETCDCTL_CERT", "value": "/certs/client.crt"},
      {"name": "ETCDCTL_KEY", "value": "/certs/client.key"}
    ],
    "volumeMounts": [{"name": "certs", "mountPath": "/certs", "readOnly": true}]
  }],
  "volumes": [{"name": "certs", "secret": {"secretName": "$EC_NAME-etcdctl"}}]
}}
EOF
)
k "$HUB" -n "$EC_NAMESPACE" delete pod "$pod" --ignore-not-found --wait >/dev/null
# Not `kubectl run -i --rm`: when etcdctl ends before kubectl attaches,
# kubectl falls back to the pod's log and may print the output twice
# (seen on kind: `get` printed its value twice). Run the pod to its end,
# then print its log once.
k "$HUB" -n "$EC_NAMESPACE" run "$pod" --quiet --restart=Never --image "$image" \
	--override-type=strategic --overrides "$overrides" --command -- /usr/local/bin/etcdctl "$@" >/dev/null
trap 'rm -rf "$tmp"; k "$HUB" -n "$EC_NAMESPACE" delete pod "$pod" --ignore-not-found --wait=false >/dev/null 2>&1 || true' EXIT
phase=""
wait_s=${ETCDFED_KIND_ETCDCTL_TIMEOUT:-150}
for ((i = 0; i < wait_s * 2; i++)); do
	phase=$(k "$HUB" -n "$EC_NAMESPACE" get pod "$pod" -o jsonpath='{.status.phase}' 2>/dev/null || true)
	[[ $phase == Succeeded || $phase == Failed ]] && break
	sleep 0.5
done
k "$HUB" -n "$EC_NAMESPACE" logs "$pod"
case $phase in
Succeeded) ;;
Failed) exit "$(k "$HUB" -n "$EC_NAMESPACE" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}' 2>/dev/null || echo 1)" ;;
*) die "the etcdctl pod did not finish within ${wait_s}s (phase '$phase'): kubectl --context $(ctx "$HUB") -n $EC_NAMESPACE describe pod $pod" ;;
esac
