#!/bin/bash
# A stand-in for kind's kindnetd, for the node image hack/kind/node-image.sh
# builds. kind's kindnetd (sigs.k8s.io/kind/images/kindnetd) is a Go module
# of its own that the Go module proxy does not serve, and its image is in a
# registry this build does not use. This script does the part of kindnetd's
# work that kind's default CNI manifest (/kind/manifests/default-cni.yaml,
# unchanged) needs, with kubectl (in-cluster configuration) and iproute2:
#
#   - the CNI configuration of this node (ptp with host-local addresses from
#     the node's spec.podCIDR, masquerading what leaves the pod range, and
#     portmap), written once the node has a pod range;
#   - a route to every other node's pod range via that node's InternalIP
#     (multi-node clusters), refreshed every 10 seconds.
#
# Not done (kindnetd does them): network policies, IPv6, the NRI plugin.
set -u

cni=/etc/cni/net.d/10-kindnet.conflist
mtu=$(cat /sys/class/net/eth0/mtu 2>/dev/null || echo 1500)

log() { printf '%s kindnetd: %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

write_cni() {
	local cidr=$1 tmp
	tmp=$(mktemp /etc/cni/net.d/.kindnet.XXXXXX)
	cat >"$tmp" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kindnet",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": true,
      "mtu": ${mtu},
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "routes": [{ "dst": "0.0.0.0/0" }],
        "ranges": [[{ "subnet": "${cidr}" }]]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
	if cmp -s "$tmp" "$cni"; then
		rm -f "$tmp"
		return
	fi
	mv -f "$tmp" "$cni"
	log "Wrote $cni for pod range $cidr"
}

log "Starting on host ${HOST_IP:?HOST_IP is not set} (pod subnet ${POD_SUBNET:-unset})"
while true; do
	if nodes=$(kubectl get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR}{" "}{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' 2>&1); then
		while read -r cidr ip; do
			[[ -n $cidr && -n $ip ]] || continue
			if [[ $ip == "$HOST_IP" ]]; then
				write_cni "$cidr"
			elif ! ip route replace "$cidr" via "$ip" 2>/dev/null; then
				log "Cannot route $cidr via $ip"
			fi
		done <<<"$nodes"
	else
		log "Cannot list the nodes: $nodes"
	fi
	sleep 10
done
