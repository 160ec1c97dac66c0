#!/usr/bin/env bash
# DNS benchmark: dnsperf against etcdfed's embedded server and against BIND9
# serving the same zone on this machine, in one run. Both serve the record
# set dnsprovider.Build computes for a 9-member etcd cluster; the query mix
# covers member A/AAAA (some NODATA), a CNAME, both SRV names, SOA, NS and
# NXDOMAIN. Rounds alternate between the servers so that load from other
# processes hits both alike.
#
# Two measurements per round:
#   max  - closed loop, OUTSTANDING queries in flight: queries/s at saturation
#   fixed - open loop at FIXED_QPS queries/s: latency at equal load
# and the server's CPU time per query (from /proc), the fairest figure on a
# machine shared with other work.
#
# Environment (defaults): DURATION=10 ROUNDS=2 CLIENTS=8 OUTSTANDING=100
# FIXED_QPS=20000 MEMBERS=9 BIND_PORT/EMBEDDED_PORT (free ports picked)
# EMBEDDED_SOCKETS (0: GOMAXPROCS) EMBEDDED_FLAGS (more flags of etcdfed-dns,
# such as "-rate-limit 200") OUT (report file, default: stdout only).
#
# Needs Debian's bind9 and dnsperf: apt-get install -y bind9 dnsperf
set -euo pipefail

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
CLIENTS=${CLIENTS:-8}
OUTSTANDING=${OUTSTANDING:-100}
FIXED_QPS=${FIXED_QPS:-20000}
MEMBERS=${MEMBERS:-9}
EMBEDDED_SOCKETS=${EMBEDDED_SOCKETS:-0}
DOMAIN=main.etcd.bench.

root=$(cd "$(dirname "$0")/.." && pwd)
need() {
  if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$1" ]; then
    echo "bench-dns: $1 not found: install the DNS dependencies (apt-get install -y bind9 bind9-utils dnsutils dnsperf)" >&2
    exit 1
  fi
}
need named
need dnsperf
need dig
named=$(command -v named || echo /usr/sbin/named)

work=$(mktemp -d /tmp/bench-dns.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "bench-dns: building (work dir $work)" >&2
(cd "$root" && go build -o "$work/etcdfed-dns" ./dnsprovider/embedded/cmd/etcdfed-dns \
  && go build -o "$work/dnsbench-zone" ./dnsprovider/internal/cmd/dnsbench-zone)
"$work/dnsbench-zone" -domain "$DOMAIN" -members "$MEMBERS" -zone "$work/db.bench" -queries "$work/queries.txt"
if [ -z "${BIND_PORT:-}" ] || [ -z "${EMBEDDED_PORT:-}" ]; then
  mapfile -t ports < <("$work/dnsbench-zone" -free-ports 2)
  BIND_PORT=${BIND_PORT:-${ports[0]}}
  EMBEDDED_PORT=${EMBEDDED_PORT:-${ports[1]}}
fi

cat >"$work/named.conf" <<EOF
options {
  directory "$work";
  pid-file "$work/named.pid";
  listen-on port $BIND_PORT { 127.0.0.1; };
  listen-on-v6 { none; };
  recursion no;
  dnssec-validation no;
  session-keyfile "$work/session.key";
  managed-keys-directory "$work";
  minimal-responses no-auth;
  notify no;
};
controls { };
zone "${DOMAIN%.}" { type primary; file "$work/db.bench"; };
EOF

"$named" -g -4 -c "$work/named.conf" >"$work/named.log" 2>&1 &
pids+=($!)
bind_pid=$!
# shellcheck disable=SC2086 # EMBEDDED_FLAGS is a list of flags
"$work/etcdfed-dns" -listen "127.0.0.1:$EMBEDDED_PORT" -udp-sockets "$EMBEDDED_SOCKETS" \
  -zone "$DOMAIN=$work/db.bench" ${EMBEDDED_FLAGS:-} >"$work/embedded.log" 2>&1 &
pids+=($!)
embedded_pid=$!

wait_up() {
  for _ in $(seq 1 100); do
    if dig @127.0.0.1 -p "$1" +time=1 +tries=1 +short "$DOMAIN" SOA 2>/dev/null | grep -q hostmaster; then return; fi
    sleep 0.1
  done
  echo "bench-dns: server on port $1 did not answer" >&2
  cat "$work/named.log" "$work/embedded.log" >&2
  exit 1
}
wait_up "$BIND_PORT"
wait_up "$EMBEDDED_PORT"

# The two servers must give the same answers before their speed means
# anything (TTLs and the order of records aside).
while read -r name type; do
  a=$(dig @127.0.0.1 -p "$BIND_PORT" +norec +noall +answer +authority "$name" "$type" | awk '{$2=""; print}' | sort)
  b=$(dig @127.0.0.1 -p "$EMBEDDED_PORT" +norec +noall +answer +authority "$name" "$type" | awk '{$2=""; print}' | sort)
  if [ "$a" != "$b" ]; then
    echo "bench-dns: answers differ for $name $type:" >&2
    echo "BIND9:" >&2; echo "$a" >&2; echo "embedded:" >&2; echo "$b" >&2
    exit 1
  fi
done <"$work/queries.txt"

# CPU time (clock ticks) the server process used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# run LABEL PORT PID MODE -> appends
# "label mode qps avg_ms stddev_ms lost cpu_us_per_query" to results
results="$work/results"
: >"$results"
run() {
  local label=$1 port=$2 pid=$3 mode=$4 extra=()
  if [ "$mode" = fixed ]; then extra=(-Q "$FIXED_QPS"); fi
  local out t0 t1
  t0=$(ticks "$pid")
  out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries.txt" -l "$DURATION" \
    -c "$CLIENTS" -T 1 -q "$OUTSTANDING" "${extra[@]}" 2>&1)
  t1=$(ticks "$pid")
  local qps avg sd lost done cpu
  qps=$(awk '/Queries per second:/ {print $4}' <<<"$out")
  avg=$(awk '/Average Latency/ {print $4 * 1000}' <<<"$out")
  sd=$(awk '/Latency StdDev/ {print $4 * 1000}' <<<"$out")
  lost=$(awk '/Queries lost:/ {print $3}' <<<"$out")
  done=$(awk '/Queries completed:/ {print $3}' <<<"$out")
  if [ -z "$qps" ]; then
    echo "bench-dns: dnsperf failed against $label:" >&2; echo "$out" >&2; exit 1
  fi
  cpu=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$done" 'BEGIN { print (n > 0 ? t / hz * 1e6 / n : 0) }')
  echo "$label $mode $qps $avg $sd $lost $cpu" >>"$results"
  printf 'bench-dns: round %s %-8s %-5s %10.0f q/s  avg %.3f ms  sd %.3f ms  lost %s  server CPU %.2f us/query\n' "$round" "$label" "$mode" "$qps" "$avg" "$sd" "$lost" "$cpu" >&2
}

echo "bench-dns: $ROUNDS rounds of ${DURATION}s per server and mode, $CLIENTS clients, $OUTSTANDING outstanding, fixed rate $FIXED_QPS q/s, $(nproc) CPUs" >&2
for round in $(seq 1 "$ROUNDS"); do
  run bind9 "$BIND_PORT" "$bind_pid" max
  run embedded "$EMBEDDED_PORT" "$embedded_pid" max
  run bind9 "$BIND_PORT" "$bind_pid" fixed
  run embedded "$EMBEDDED_PORT" "$embedded_pid" fixed
done

report=$(awk '
  { n[$1" "$2]++; q[$1" "$2]+=$3; a[$1" "$2]+=$4; s[$1" "$2]+=$5; l[$1" "$2]+=$6; c[$1" "$2]+=$7 }
  END {
    printf "DNS benchmark (dnsperf, same zone, same machine, mean of rounds)\n"
    printf "%-9s %-6s %12s %12s %12s %8s %14s\n", "server", "mode", "queries/s", "avg ms", "stddev ms", "lost", "CPU us/query"
    split("max fixed", modes, " ")
    for (m = 1; m <= 2; m++) for (srv = 1; srv <= 2; srv++) {
      k = (srv == 1 ? "bind9" : "embedded") " " modes[m]
      printf "%-9s %-6s %12.0f %12.3f %12.3f %8d %14.2f\n", (srv == 1 ? "bind9" : "embedded"), modes[m], q[k]/n[k], a[k]/n[k], s[k]/n[k], l[k], c[k]/n[k]
    }
    qb = q["bind9 max"]/n["bind9 max"]; qe = q["embedded max"]/n["embedded max"]
    lb = a["bind9 fixed"]/n["bind9 fixed"]; le = a["embedded fixed"]/n["embedded fixed"]
    cb = c["bind9 max"]/n["bind9 max"]; ce = c["embedded max"]/n["embedded max"]
    printf "ratio embedded/bind9: queries/s at saturation %.2f; average latency at a fixed rate %.2f; server CPU per query %.2f\n", qe/qb, (lb > 0 ? le/lb : 0), (cb > 0 ? ce/cb : 0)
  }' "$results")
echo "$report"
if [ -n "${OUT:-}" ]; then echo "$report" >"$OUT"; fi
