#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks run for real (BIND9,
# dig, dnsperf, iptables, iproute2), only those whose command is missing.
# Needs root (or sudo) and Debian's package registry. It starts no service
# and stops none it did not install.
#
# `hack/system-deps.sh images` installs containerd and runc, which run the
# images `make images` builds (dev/images' test starts a private
# containerd; the package's own service is never started, see policy-rc.d
# below).
#
# `hack/system-deps.sh kind` installs Docker's engine (Debian's docker.io,
# not started: hack/kind/dockerd.sh or the host's service starts it),
# debootstrap and libseccomp-dev, which hack/kind/node-image.sh needs.
#
# `hack/system-deps.sh demo` (make demo) installs only what the local
# environment uses (iptables: pods get their own source address, zones can
# be partitioned), and only as root with apt-get; otherwise, or when the
# install fails, it says so and succeeds: the demo runs without it.
#
# `hack/system-deps.sh realnodes` (make demo NODES=real, make
# test-realnodes) installs what the local environment's real nodes run
# besides the tools hack/tools.sh builds: runc, the CNI plugins (bridge,
# host-local, portmap, loopback in /usr/lib/cni), iptables (kube-proxy) and
# iproute2 (network namespaces, veths, routes). Real nodes need root, so
# this mode fails when it cannot install.
set -euo pipefail

for_demo=false
for_realnodes=false
[[ ${1:-} == demo ]] && for_demo=true
[[ ${1:-} == realnodes ]] && for_realnodes=true
for_images=false
[[ ${1:-} == images ]] && for_images=true
# kind: the Docker engine kind runs its nodes in, debootstrap for the node
# image's root filesystem, and libseccomp's headers for runc's build
# (hack/kind/node-image.sh).
for_kind=false
[[ ${1:-} == kind ]] && for_kind=true

# command -> Debian package
declare -A pkgs=(
	[named]=bind9
	[tsig-keygen]=bind9-utils
	[dig]=dnsutils
	[dnsperf]=dnsperf
	[iptables]=iptables
	[ip]=iproute2
)
if $for_demo; then
	pkgs=([iptables]=iptables)
fi
if $for_realnodes; then
	pkgs=([runc]=runc [iptables]=iptables [ip]=iproute2 [nsenter]=util-linux)
fi
if $for_images; then
	pkgs=([containerd]=containerd [ctr]=containerd [runc]=runc)
fi
if $for_kind; then
	pkgs=([dockerd]=docker.io [debootstrap]=debootstrap)
fi

missing=()
for cmd in "${!pkgs[@]}"; do
	if ! command -v "$cmd" >/dev/null 2>&1 && [[ ! -x /usr/sbin/$cmd ]]; then
		missing+=("${pkgs[$cmd]}")
	fi
done
# The CNI plugins are no commands on PATH: Debian puts them in /usr/lib/cni.
if $for_realnodes && [[ ! -x /usr/lib/cni/bridge || ! -x /usr/lib/cni/host-local ]]; then
	missing+=(containernetworking-plugins)
fi
if $for_kind && [[ ! -e /usr/include/seccomp.h ]]; then
	missing+=(libseccomp-dev)
fi
[[ ${#missing[@]} -eq 0 ]] && exit 0

if $for_demo && { [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; }; then
	echo ">> not installing ${missing[*]} (needs root and apt-get); the demo runs without it: etcdfed dev up says what that changes"
	exit 0
fi

install() {
	local sudo=""
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null 2>&1 || { echo "need root to install: ${missing[*]}" >&2; return 1; }
		sudo=sudo
	fi
	echo ">> installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# The bind9 package would start a system named on port 53; the tests
	# start their own on loopback ports. Keep package scripts from starting
	# any service during this install (policy-rc.d, Debian's switch for
	# it), unless the machine already has a policy of its own, which is
	# left as it is.
	local policy=/usr/sbin/policy-rc.d
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\n# Written by etcdfed hack/system-deps.sh for the length of one install.\nexit 101\n' | $sudo tee "$policy" >/dev/null
		$sudo chmod 755 "$policy"
		# shellcheck disable=SC2064 # expanded now, on purpose
		trap "$sudo rm -f $policy" EXIT
	fi
	$sudo apt-get update -qq || return
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || return
	# With systemd the unit is also enabled for the next boot: disable the
	# one this install added (named was missing before it), nothing else.
	if [[ " ${missing[*]} " == *" bind9 "* ]] && [[ -d /run/systemd/system ]]; then
		$sudo systemctl disable --now named >/dev/null 2>&1 || true
	fi
	if [[ " ${missing[*]} " == *" containerd "* ]] && [[ -d /run/systemd/system ]]; then
		$sudo systemctl disable --now containerd >/dev/null 2>&1 || true
	fi
}

if $for_demo; then
	# Never fail the demo over an optional package.
	install || echo ">> installing ${missing[*]} failed; the demo runs without it: etcdfed dev up says what that changes"
	exit 0
fi
install
