#!/usr/bin/env bash
# The running system against Slurm (docs/benchmarks.md): starts
# `hachi dev --nodes 4 --preset hgx-h100` on 127.0.0.1 with a fresh state directory and
# measures what ../shared/tools/slurm-baseline/run.sh measures of Slurm, with the same
# commands and options where Hachi has them (no -Q: Hachi's submit has no quiet flag, its
# output goes to /dev/null; no -p: `hachi dev` without --config has one partition), in
# run.sh's order:
#   c)  `hachi run --gres=gpu:1 -t 1 -- true`, submit to finish, N_LAT runs (min/median/max)
#   a)  N_JOBS sequential `hachi submit -H --gres=gpu:1 -t 1 -o /dev/null --wrap true`
#   a') the same as one array (--array=1-N_JOBS)
#   b)  first submit -> all N_JOBS trivial 1-GPU jobs done, sequential submits, polling
#       `hachi queue` every 0.25 s as run.sh polls squeue
#   b') the same as one array
# Prints a table and writes BUILD_DIR/bench-results/server_bench.json.
#
#   scripts/server-bench.sh BUILD_DIR            # ~1-3 min on 2 shared cores
#   N_JOBS=200 N_LAT=10 scripts/server-bench.sh build
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)  # before any cd

build=${1:?usage: scripts/server-bench.sh BUILD_DIR}
hachi=$(cd "$build" && pwd)/hachi
[ -x "$hachi" ] || { echo "server-bench: $hachi is not built" >&2; exit 1; }
N_JOBS=${N_JOBS:-1000}
N_LAT=${N_LAT:-20}
NODES=${NODES:-4}
PRESET=${PRESET:-hgx-h100}
E2E_TIMEOUT=${E2E_TIMEOUT:-900}  # cap on one end-to-end run, seconds (run.sh's)
out=$(cd "$build" && pwd)/bench-results
mkdir -p "$out"

tmp=$(mktemp -d /tmp/hachi-server-bench.XXXXXX)
dev_pid=""
cleanup() {
  if [ -n "$dev_pid" ] && kill -0 "$dev_pid" 2>/dev/null; then
    kill -TERM "$dev_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$dev_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
now_ns() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", (b-a)/1e9}'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN{ if (s>0) printf "%.1f", n/s; else print "inf"}'; }
# min median max of integers (ms) on stdin
stats() { sort -n | awk '{a[NR]=$1} END{ if(!NR){print "0 0 0"; exit}
  m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%d %g %d\n", a[1], m, a[NR]}'; }

# ---- the server and its agents
log "starting hachi dev --nodes $NODES --preset $PRESET (state in $tmp/state)"
cd "$tmp"  # jobs inherit this as their working directory
# shellcheck source=scripts/dev-cluster.sh
. "$here/dev-cluster.sh"
start_dev "$hachi" "$tmp" "$NODES" "$PRESET" 150 server-bench
log "hachi dev up at $url with $NODES nodes"

queued() { "$hachi" queue -o %i | tail -n +2 | wc -l; }
completed() { "$hachi" queue -t CD -o %i | tail -n +2 | wc -l; }
cancel_all() {  # as run.sh's scancel + wait_queue_empty 60
  local ids
  # Job ids, not %i (an array task shows as ARRAYID_TASK there), of the jobs not ended:
  # /jobs lists recently ended jobs too, and `hachi cancel` exits 1 on those ("already
  # ended"). A job can still end between this listing and the cancel, so a failed cancel
  # does not stop the script: the wait below is the check.
  ids=$("$hachi" queue --json | python3 -c '
import json, sys
doc = json.load(sys.stdin)
jobs = doc.get("jobs", []) if isinstance(doc, dict) else doc
ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
print(" ".join(str(j["id"]) for j in jobs if j.get("state") not in ended))')
  # shellcheck disable=SC2086
  [ -z "$ids" ] || "$hachi" cancel $ids >/dev/null 2>"$tmp/cancel.err" ||
    log "cancel: $(grep -vc 'already ended' "$tmp/cancel.err") error(s) other than an ended job"
  for _ in $(seq 240); do [ "$(queued)" -eq 0 ] && return 0; sleep 0.25; done
  echo "server-bench: jobs still queued after cancelling" >&2
  return 1
}

# ---- c) hachi run latency, submit to finish
log "c) hachi run --gres=gpu:1 -t 1 -- true x$N_LAT"
: >"$tmp/lat"
for _ in $(seq "$N_LAT"); do
  t0=$(now_ns)
  timeout 60 "$hachi" run --gres=gpu:1 -t 1 -- true
  t1=$(now_ns)
  echo $(((t1 - t0) / 1000000)) >>"$tmp/lat"
done
read -r lat_min lat_med lat_max < <(stats <"$tmp/lat")

# ---- a) submission, held
log "a) hachi submit -H x$N_JOBS"
t0=$(now_ns)
fails=$(for _ in $(seq "$N_JOBS"); do
  "$hachi" submit -H --gres=gpu:1 -t 1 -o /dev/null --wrap true >/dev/null || echo FAIL
done | grep -c FAIL || true)
t1=$(now_ns)
sub_s=$(secs "$t0" "$t1")
sub_held=$(queued)
cancel_all
t0=$(now_ns)
"$hachi" submit -H --gres=gpu:1 -t 1 -o /dev/null --array=1-"$N_JOBS" --wrap true >/dev/null
t1=$(now_ns)
arr_s=$(secs "$t0" "$t1")
arr_held=$(queued)
cancel_all

# ---- b) end to end: first submit -> all N_JOBS completed
e2e() {  # mode -> "submit_phase_s total_s completed left"
  local mode=$1 t0 t1 t2 end left=1 before
  before=$(completed)
  t0=$(now_ns)
  if [ "$mode" = array ]; then
    "$hachi" submit --gres=gpu:1 -t 1 -o /dev/null --array=1-"$N_JOBS" --wrap true >/dev/null
  else
    for _ in $(seq "$N_JOBS"); do
      "$hachi" submit --gres=gpu:1 -t 1 -o /dev/null --wrap true >/dev/null
    done
  fi
  t1=$(now_ns)
  end=$(($(date +%s) + E2E_TIMEOUT))
  while [ "$(date +%s)" -lt "$end" ]; do
    left=$(queued)
    [ "$left" -eq 0 ] && break
    sleep 0.25
  done
  t2=$(now_ns)
  [ "$left" -eq 0 ] || cancel_all
  echo "$(secs "$t0" "$t1") $(secs "$t0" "$t2") $(($(completed) - before)) $left"
}
log "b) end to end, $N_JOBS x 1-GPU jobs, sequential submits"
read -r e2e_sub_s e2e_s e2e_done e2e_left < <(e2e loop)
log "b') end to end, $N_JOBS x 1-GPU jobs, one array"
read -r e2ea_sub_s e2ea_s e2ea_done e2ea_left < <(e2e array)

load=$(cut -d' ' -f1-3 /proc/loadavg)
# ---- report
cat <<EOF

Hachi $("$hachi" --version 2>/dev/null || echo "(no --version)"), hachi dev --nodes $NODES --preset $PRESET, $(nproc) cores, load average $load
| # | measurement | figure |
|---|---|---|
| a  | $N_JOBS sequential \`hachi submit -H --gres=gpu:1 -t 1 -o /dev/null --wrap true\` | ${sub_s} s = $(rate "$N_JOBS" "$sub_s") submits/s (failures $fails, held $sub_held) |
| a' | the same as one \`--array=1-$N_JOBS\` | ${arr_s} s (held $arr_held) |
| b  | first submit -> all $N_JOBS done, sequential submits | ${e2e_s} s = $(rate "$N_JOBS" "$e2e_s") jobs/s (submit phase ${e2e_sub_s} s; completed $e2e_done, left $e2e_left) |
| b' | the same as one array | ${e2ea_s} s = $(rate "$N_JOBS" "$e2ea_s") jobs/s (completed $e2ea_done, left $e2ea_left) |
| c  | \`hachi run --gres=gpu:1 -t 1 -- true\`, $N_LAT runs | min $lat_min / median $lat_med / max $lat_max ms |
EOF

cat >"$out/server_bench.json" <<EOF
{
  "nodes": $NODES, "preset": "$PRESET", "cores": $(nproc), "loadavg": "$load",
  "n_jobs": $N_JOBS, "n_lat": $N_LAT,
  "submit": {"seconds": $sub_s, "per_second": $(rate "$N_JOBS" "$sub_s"), "failures": $fails, "held": $sub_held},
  "submit_array": {"seconds": $arr_s, "held": $arr_held},
  "e2e_loop": {"seconds": $e2e_s, "jobs_per_second": $(rate "$N_JOBS" "$e2e_s"), "submit_phase_seconds": $e2e_sub_s, "completed": $e2e_done, "left": $e2e_left},
  "e2e_array": {"seconds": $e2ea_s, "jobs_per_second": $(rate "$N_JOBS" "$e2ea_s"), "submit_phase_seconds": $e2ea_sub_s, "completed": $e2ea_done, "left": $e2ea_left},
  "run_latency_ms": {"min": $lat_min, "median": $lat_med, "max": $lat_max}
}
EOF
log "wrote $out/server_bench.json"
