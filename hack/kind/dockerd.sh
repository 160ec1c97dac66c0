#!/usr/bin/env bash
# Makes sure a Docker engine answers: nothing when `docker info` works, else
# (as root) starts the Debian docker.io engine, through systemd when it runs
# the machine, otherwise as a background dockerd logging to
# /var/log/etcdfed-dockerd.log (a CI container or a VM without an init
# system). hack/system-deps.sh kind installs it.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need docker
docker info >/dev/null 2>&1 && exit 0
[[ $(id -u) -eq 0 ]] || die "no Docker engine answers and starting one needs root (or start Docker yourself)"
command -v dockerd >/dev/null 2>&1 || die "no dockerd: hack/system-deps.sh kind installs Debian's docker.io"
if [[ -d /run/systemd/system ]]; then
	log "Starting docker.service"
	systemctl start docker
else
	log "Starting dockerd in the background (log: /var/log/etcdfed-dockerd.log)"
	setsid nohup dockerd >>/var/log/etcdfed-dockerd.log 2>&1 </dev/null &
fi
wait_until 60 "the Docker engine" docker info || die "the Docker engine did not start: see /var/log/etcdfed-dockerd.log"
