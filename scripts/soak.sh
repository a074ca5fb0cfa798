#!/usr/bin/env bash
# The soak test (docs/soak.md), loopback only: starts `hachi dev --nodes 20
# --preset hgx-h100` (20 simulated 8-GPU agents, 160 GPUs) with a fresh state directory,
# runs BUILD_DIR/bench/hachi_soak against it (JOBS short jobs submitted in bursts by
# CLIENTS concurrent clients, then the checks: every job ended COMPLETED exactly once, its
# output matches its allocation, no GPU double-booked by the jobs' own clocks), and
# samples the dev process every second meanwhile: VmRSS, VmHWM, threads, CPU time, and
# how far the soak is (its OUT/progress). Prints RSS at 10%, 50% and 100% of the jobs
# done, its maximum and its slope, then stops the server (SIGTERM, then SIGKILL after
# 30 s) and removes the temp directory. The server exposes no scheduling-cycle timing
# (ControllerStats stays internal; GET /stats is queue waits), so none is sampled.
#
# Bounded: the whole run ends within --timeout SECONDS (default 1200) even if the server
# or the client hangs (a SIGSTOPped server: the client is killed, then the server).
# Exits with hachi_soak's status: 0 all checks passed, 1 one failed, 124 out of time.
# Keeps BUILD_DIR/bench-results/soak/{rss.tsv,summary.json,soak.log,dev.log,stats.json,
# cli-stats.json}, overwritten by the next run.
#
#   scripts/soak.sh BUILD_DIR [--timeout SECONDS]  # JOBS=50000: ~3 min of soak on 2 cores,
#                                                  # then 1-3 min removing 50,000 files
#   JOBS=2000 CLIENTS=8 scripts/soak.sh build-soak
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)  # before any cd

build=${1:?usage: scripts/soak.sh BUILD_DIR [--timeout SECONDS]}
shift
TIMEOUT=1200
while [ $# -gt 0 ]; do
  case $1 in
    --timeout) TIMEOUT=${2:?--timeout needs seconds}; shift 2 ;;
    --timeout=*) TIMEOUT=${1#--timeout=}; shift ;;
    *) echo "soak: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
hachi=$build/hachi
soak=$build/bench/hachi_soak
for b in "$hachi" "$soak"; do
  [ -x "$b" ] || { echo "soak: $b is not built (cmake --build $build --target hachi hachi_soak)" >&2; exit 1; }
done
JOBS=${JOBS:-50000}
CLIENTS=${CLIENTS:-16}
BURST=${BURST:-20}
PAUSE_MS=${PAUSE_MS:-50}
NODES=${NODES:-20}
PRESET=${PRESET:-hgx-h100}
deadline=$(($(date +%s) + TIMEOUT))
res=$build/bench-results/soak
mkdir -p "$res"

tmp=$(mktemp -d /tmp/hachi-soak.XXXXXX)
dev_pid=""
sampler_pid=""
cleanup() {
  [ -z "$sampler_pid" ] || kill "$sampler_pid" 2>/dev/null || true
  if [ -n "$dev_pid" ] && kill -0 "$dev_pid" 2>/dev/null; then
    log "stopping hachi dev (SIGTERM)"
    kill -TERM "$dev_pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$dev_pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$dev_pid" 2>/dev/null; then
      log "hachi dev still running after 30 s: SIGKILL"
      kill -KILL "$dev_pid" 2>/dev/null || true
    fi
    wait "$dev_pid" 2>/dev/null || true
  fi
  [ ! -f "$tmp/dev.log" ] || cp "$tmp/dev.log" "$res/dev.log"
  # 50,000 output files and the spool take minutes to remove on a busy disk.
  timeout "$(cap 600 10)" rm -rf "$tmp" || log "soak: out of time, $tmp is left behind"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
left() { echo $((deadline - $(date +%s))); }
# cap MAX [MIN]: MAX seconds, or what is left of the deadline if less, but at least MIN.
cap() { local l; l=$(left); l=$((l < $1 ? l : $1)); echo $((l < ${2:-1} ? ${2:-1} : l)); }

# ---- the server and its agents
log "starting hachi dev --nodes $NODES --preset $PRESET (state in $tmp/state)"
cd "$tmp"
# shellcheck source=scripts/dev-cluster.sh
. "$here/dev-cluster.sh"
start_dev "$hachi" "$tmp" "$NODES" "$PRESET" 300 soak
log "hachi dev (pid $dev_pid) up at $url with $NODES nodes"

# ---- the sampler: one line a second while the dev process lives
tick=$(getconf CLK_TCK)
mkdir -p "$tmp/out"
(
  t0=$(date +%s%N)
  echo -e "t_s\trss_kb\thwm_kb\tthreads\tcpu_s\tphase\tsubmitted\tdone"
  while kill -0 "$dev_pid" 2>/dev/null; do
    st=$(awk '/^VmRSS|^VmHWM|^Threads/{printf "%s ", $2}' "/proc/$dev_pid/status" 2>/dev/null || true)
    cpu=$(awk -v tick="$tick" '{printf "%.2f", ($14+$15)/tick}' "/proc/$dev_pid/stat" 2>/dev/null || echo 0)
    prog=$(cat "$tmp/out/progress" 2>/dev/null || echo "start 0 0 0")
    read -r rss hwm thr <<<"$st"
    read -r phase _ sub ndone <<<"$prog"
    printf '%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN{print (b-a)/1e9}')" \
      "${rss:-0}" "${hwm:-0}" "${thr:-0}" "$cpu" "$phase" "$sub" "$ndone"
    sleep 1
  done
) >"$res/rss.tsv" &
sampler_pid=$!

# ---- the soak: the client gets what is left minus 3 min for the stats reads, the stop
# and the removal (its checks are inside its budget)
budget=$(($(left) - 180))
[ "$budget" -gt 150 ] || { echo "soak: --timeout too short" >&2; exit 1; }
log "hachi_soak: $JOBS jobs, $CLIENTS clients, bursts of $BURST (wait at most $((budget - 90)) s)"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Connections the kernel dropped because a listen queue was full (all sockets of the
# machine; only loopback traffic here): the server listens with a backlog of 5.
listen_overflows() { nstat -az TcpExtListenOverflows 2>/dev/null | awk '/ListenOverflows/{print $2}'; }
overflows_before=$(listen_overflows)
rc=0
# The clients go over TCP, as remote users would: with a token (docs/api.md).
HACHI_TOKEN=$("$hachi" token create "$(id -un)" 2>/dev/null) || { echo "soak: no token" >&2; exit 1; }
export HACHI_TOKEN
timeout -k 5 "$budget" "$soak" --server "$url" --out "$tmp/out" --jobs "$JOBS" \
  --clients "$CLIENTS" --burst "$BURST" --pause-ms "$PAUSE_MS" --timeout-s $((budget - 90)) \
  | tee "$res/soak.log" || rc=$?
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
overflows_after=$(listen_overflows)
cp "$tmp/out/summary.json" "$res/summary.json" 2>/dev/null || true
# With the whole history in memory: GET /stats walks every job record on the server;
# `hachi stats` fetches every record (GET /jobs?all=1) and computes them itself.
rss_now() { awk '/^VmRSS/{print $2}' "/proc/$dev_pid/status" 2>/dev/null || echo 0; }
rss_checked=$(rss_now)
stats_ms=-1
if command -v curl >/dev/null; then
  t0=$(date +%s%N)
  timeout "$(cap 30)" curl -sf -o "$res/stats.json" "$url/api/v1/stats" || true
  stats_ms=$((($(date +%s%N) - t0) / 1000000))
fi
rss_stats=$(rss_now)
t0=$(date +%s%N)
timeout "$(cap 60)" "$hachi" stats --json >"$res/cli-stats.json" 2>&1 || true
cli_stats_ms=$((($(date +%s%N) - t0) / 1000000))
rss_cli_stats=$(rss_now)
sleep 1.5  # one more sample after the checks' GET /jobs?all=1 and the stats
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""

# ---- the memory figures
log "RSS of hachi dev (pid $dev_pid), from $res/rss.tsv"
awk -F'\t' -v n="$JOBS" -v stats_ms="$stats_ms" -v cli_stats_ms="$cli_stats_ms" '
  NR == 1 { next }
  { t[NR] = $1; rss[NR] = $2; ph[NR] = $6; sub_[NR] = $7; done[NR] = $8; cpu[NR] = $5 }
  ph[NR] == "submit" || ph[NR] == "drain" || ph[NR] == "drained" {
    if ($2 > run_max) run_max = $2
    if (!first) first = NR
    last = NR
  }
  $2 > all_max { all_max = $2 }
  END {
    if (!first) { print "no samples while the soak ran"; exit }
    printf "at start (first sample): %d KB (%s jobs submitted)\n", rss[2], sub_[2]
    split("10 50 100", pcts, " ")
    for (k = 1; k <= 3; k++) {
      p = pcts[k]; at = 0
      for (i = first; i <= last; i++) if (done[i] >= n * p / 100) { at = i; break }
      if (at) printf "at %3d%% done: %8d KB  (t %6.1f s, %6d submitted, %6d done, server CPU %.0f s)\n", p, rss[at], t[at], sub_[at], done[at], cpu[at]
      else printf "at %3d%% done: never reached\n", p
      if (p == 10) a10 = at; if (p == 100) a100 = at
    }
    printf "max while running: %d KB; max overall (with the reads below): %d KB\n", run_max, all_max
    # Least squares of RSS against jobs submitted while submitting, and against jobs
    # done once every job was submitted (the records then all exist).
    for (i = first; i <= last; i++) {
      if (ph[i] == "submit") { x = sub_[i]; sx += x; sy += rss[i]; sxx += x*x; sxy += x*rss[i]; c++ }
      if (ph[i] == "drain") { x = done[i]; dx += x; dy += rss[i]; dxx += x*x; dxy += x*rss[i]; d++ }
    }
    if (c > 2 && c*sxx - sx*sx > 0) printf "slope while submitting: %.0f KB per 1000 jobs submitted (%d samples)\n", 1000*(c*sxy - sx*sy)/(c*sxx - sx*sx), c
    if (d > 2 && d*dxx - dx*dx > 0) printf "slope after the last submit: %.0f KB per 1000 jobs done (%d samples)\n", 1000*(d*dxy - dx*dy)/(d*dxx - dx*dx), d
    if (a10 && a100 && done[a100] > done[a10]) printf "10%% -> 100%% done: %.0f KB per 1000 jobs\n", 1000*(rss[a100]-rss[a10])/(done[a100]-done[a10])
    printf "server CPU: %.0f s in all; afterwards GET /stats took %d ms, hachi stats --json %d ms\n", cpu[NR], stats_ms, cli_stats_ms
  }' "$res/rss.tsv"
echo "RSS after the checks' GET /jobs?all=1: $rss_checked KB; after GET /stats: $rss_stats KB; after hachi stats: $rss_cli_stats KB"
echo "load average before $load_before, after $load_after; $(nproc) cores"
[ -z "$overflows_before" ] || echo "listen queue overflows (TcpExtListenOverflows) during the soak: $((overflows_after - overflows_before))"
log "kept $res/{rss.tsv,summary.json,soak.log,stats.json,cli-stats.json,dev.log}"
[ "$rc" -eq 0 ] || log "hachi_soak exited $rc"
exit "$rc"
