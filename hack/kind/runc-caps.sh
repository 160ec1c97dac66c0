#!/usr/bin/env bash
# A runc wrapper for Docker engines on hosts whose capability bounding set
# lacks capabilities the kernel knows: there `docker run --privileged`
# (every kind node) fails with "runc create failed: unable to apply caps:
# operation not permitted", because Docker 20.10 asks for every capability
# it knows of, not for those the host may grant. Seen on a Firecracker VM
# whose bounding set lacks CAP_SYS_RESOURCE.
#
# It removes from the container's configuration (create and run: the
# bundle's config.json; exec: the --process file) the capabilities missing
# from its own bounding set, then runs runc ($ETCDFED_RUNC, default runc on
# PATH) with the same arguments. hack/kind/dockerd.sh starts dockerd with
# it as the default runtime only when the bounding set lacks a capability.
set -euo pipefail

names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
	NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT
	SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE
	AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ
	PERFMON BPF CHECKPOINT_RESTORE)

# missing: the JSON array of capability names not in the bounding set.
missing() {
	local bnd i out=()
	bnd=$((16#$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)))
	for i in "${!names[@]}"; do
		((bnd >> i & 1)) || out+=("\"CAP_${names[$i]}\"")
	done
	local IFS=,
	printf '[%s]' "${out[*]}"
}

# strip FILE PATH: remove the missing capabilities from the capability sets
# under PATH (a jq path, "" for the top) of the JSON file FILE.
strip() {
	local file=$1 path=$2 m tmp
	[[ -f $file ]] || return 0
	m=$(missing)
	[[ $m == "[]" ]] && return 0
	tmp=$(mktemp "$file.XXXXXX")
	jq --argjson m "$m" "if $path.capabilities then $path.capabilities |= with_entries(.value |= ((. // []) - \$m)) else . end" "$file" >"$tmp"
	chmod --reference="$file" "$tmp"
	mv -f "$tmp" "$file"
}

args=("$@")
cmd=""
for ((i = 0; i < ${#args[@]}; i++)); do
	a=${args[$i]}
	case $a in
	create | run | exec) [[ -z $cmd ]] && cmd=$a ;;
	--bundle | -b) [[ $cmd == create || $cmd == run ]] && strip "${args[$((i + 1))]}/config.json" .process ;;
	--bundle=*) [[ $cmd == create || $cmd == run ]] && strip "${a#--bundle=}/config.json" .process ;;
	--process | -p) [[ $cmd == exec ]] && strip "${args[$((i + 1))]}" "" ;;
	--process=*) [[ $cmd == exec ]] && strip "${a#--process=}" "" ;;
	esac
done
exec "${ETCDFED_RUNC:-runc}" "$@"
