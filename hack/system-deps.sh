#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks run for real (BIND9,
# dig, dnsperf, iptables, iproute2), only those whose command is missing.
# Needs root (or sudo) and Debian's package registry.
set -euo pipefail

# command -> Debian package
declare -A pkgs=(
	[named]=bind9
	[tsig-keygen]=bind9-utils
	[dig]=dnsutils
	[dnsperf]=dnsperf
	[iptables]=iptables
	[ip]=iproute2
)

missing=()
for cmd in "${!pkgs[@]}"; do
	if ! command -v "$cmd" >/dev/null 2>&1 && [[ ! -x /usr/sbin/$cmd ]]; then
		missing+=("${pkgs[$cmd]}")
	fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null 2>&1 || { echo "need root to install: ${missing[*]}" >&2; exit 1; }
	sudo=sudo
fi
echo ">> installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The bind9 package starts a system named on port 53; the tests start their
# own on loopback ports and want nothing else listening.
if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable --now named >/dev/null 2>&1 || true; fi
$sudo pkill -x named >/dev/null 2>&1 || true
