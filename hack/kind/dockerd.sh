#!/usr/bin/env bash
# Makes sure a Docker engine answers: nothing when `docker info` works, else
# (as root) starts the Debian docker.io engine, through systemd when it runs
# the machine, otherwise as a background dockerd logging to
# /var/log/etcdfed-dockerd.log (a CI container or a VM without an init
# system). hack/system-deps.sh kind installs it.
#
# On a host whose capability bounding set lacks capabilities the kernel
# knows (kind's privileged nodes then fail to start, see runc-caps.sh), the
# dockerd it starts runs containers through hack/kind/runc-caps.sh; an
# engine it started earlier without that is restarted.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pidfile=/run/etcdfed-dockerd.pid
runtime=etcdfed-runc
need docker

if docker info >/dev/null 2>&1; then
	if ! caps_missing || [[ $(docker info -f '{{ .DefaultRuntime }}') == "$runtime" ]]; then
		exit 0
	fi
	if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
		log "Restarting the dockerd this script started, with hack/kind/runc-caps.sh (this host's capability bounding set lacks capabilities)"
		kill "$(cat "$pidfile")"
		wait_until 60 "dockerd to stop" bash -c "! kill -0 $(cat "$pidfile") 2>/dev/null"
	else
		log "warning: this host's capability bounding set lacks capabilities and the running Docker engine does"
		log "         not run containers through hack/kind/runc-caps.sh: kind's privileged nodes may fail with"
		log "         'unable to apply caps: operation not permitted'. Start dockerd with:"
		log "         --add-runtime $runtime=$REPO/hack/kind/runc-caps.sh --default-runtime $runtime"
		exit 0
	fi
fi
[[ $(id -u) -eq 0 ]] || die "no Docker engine answers and starting one needs root (or start Docker yourself)"
command -v dockerd >/dev/null 2>&1 || die "no dockerd: hack/system-deps.sh kind installs Debian's docker.io"
args=()
if caps_missing; then
	args+=(--add-runtime "$runtime=$REPO/hack/kind/runc-caps.sh" --default-runtime "$runtime")
fi
if [[ -d /run/systemd/system && ${#args[@]} -eq 0 ]]; then
	log "Starting docker.service"
	systemctl start docker
else
	log "Starting dockerd ${args[*]} in the background (log: /var/log/etcdfed-dockerd.log)"
	setsid nohup dockerd "${args[@]}" >>/var/log/etcdfed-dockerd.log 2>&1 </dev/null &
	echo $! >"$pidfile"
fi
wait_until 60 "the Docker engine" docker info || die "the Docker engine did not start: see /var/log/etcdfed-dockerd.log"
