#!/usr/bin/env bash
# Job-step latency, Hachi beside Debian's Slurm in the same run (docs/benchmarks.md
# "Job steps"):
#   a) `srun -n 8 true` inside a running allocation (step created -> every task ended ->
#      srun returned), N times;
#   b) `hachi run -- true` (an allocation, one step through the output relay, the
#      allocation given back) / Slurm's `srun true` outside an allocation, N times.
# Hachi: `hachi dev` with one simulated hgx-h100 node. Slurm: the baseline
# (../shared/tools/slurm-baseline/run.sh, one fake 8-GPU node on 127.0.0.1), started and
# stopped here unless SLURM=0. Prints median and p95 in ms, and the ratios.
#
#   scripts/steps-bench.sh BUILD_DIR            # N=20
set -euo pipefail
build=${1:?usage: scripts/steps-bench.sh BUILD_DIR}
hachi=$(cd "$build" && pwd)/hachi
N=${N:-20}
SLURM=${SLURM:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
baseline=${HACHI_SHARED_DIR:-$root/../shared}/tools/slurm-baseline/run.sh
dir=$(mktemp -d /tmp/hachi-steps-bench.XXXXXX)
dev_pid=
slurm_started=0
cleanup() {
  [ -n "$dev_pid" ] && kill -TERM "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
  if [ "$slurm_started" = 1 ]; then
    [ -n "${salloc_job:-}" ] && scancel "$salloc_job" 2>/dev/null
    NODES=1 "$baseline" stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
now() { date +%s%N; }
# median and p95 of the numbers (ns) in a file, in ms: "median p95"
stats() { sort -n "$1" | awk '{a[NR]=$1} END {
  m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
  p = a[int(NR * 0.95 + 0.999)];
  printf "%.1f %.1f\n", m / 1e6, p / 1e6 }'; }
time_n() {  # time_n OUTFILE CMD...: N runs of CMD, each one's ns in OUTFILE
  local out=$1; shift
  : >"$out"
  for _ in $(seq "$N"); do
    local t0; t0=$(now)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
    echo $(($(now) - t0)) >>"$out"
  done
}

mkdir -p "$dir/bin"
"$hachi" slurm install-links "$dir/bin" >/dev/null
"$hachi" dev --state-dir "$dir/state" --nodes 1 --listen 127.0.0.1:0 2>"$dir/dev.log" &
dev_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$dir/dev.log" && break; sleep 0.1; done
export HACHI_SERVER=unix:$dir/state/hachi.sock
hsrun() { PATH=$dir/bin:$PATH srun "$@"; }
hsbatch() { PATH=$dir/bin:$PATH sbatch "$@"; }
job=$(hsbatch --parsable -o /dev/null -N 1 -n 8 --gpus-per-node=8 --wrap 'sleep 3600')
for _ in $(seq 100); do
  PATH=$dir/bin:$PATH squeue -h -j "$job" -o %t | grep -q R && break
  sleep 0.1
done
hsrun --jobid="$job" -n 8 true  # warm
time_n "$dir/h_step" hsrun --jobid="$job" -n 8 true
PATH=$dir/bin:$PATH scancel "$job"
"$hachi" run -- true >/dev/null 2>&1  # warm
time_n "$dir/h_run" "$hachi" run -- true
read -r h_step_m h_step_p < <(stats "$dir/h_step")
read -r h_run_m h_run_p < <(stats "$dir/h_run")
echo "hachi: srun -n 8 true in an allocation: median ${h_step_m} ms, p95 ${h_step_p} ms (N=$N)"
echo "hachi: hachi run -- true:               median ${h_run_m} ms, p95 ${h_run_p} ms (N=$N)"
kill -TERM "$dev_pid"; wait "$dev_pid" 2>/dev/null || true; dev_pid=

if [ "$SLURM" != 1 ] || [ ! -x "$baseline" ] || [ "$(id -u)" -ne 0 ]; then
  echo "slurm: skipped (SLURM=0, no baseline at $baseline, or not root)"
  exit 0
fi
export SLURM_CONF=/tmp/slurm-baseline/etc/slurm.conf
SKIP_INSTALL=${SKIP_INSTALL:-0} NODES=1 "$baseline" start >"$dir/slurm-start.log" 2>&1
slurm_started=1
salloc_job=$(/usr/bin/sbatch --parsable -o /dev/null -p gpu8 -N 1 -n 8 --gres=gpu:8 -t 30 --wrap 'sleep 1800')
for _ in $(seq 300); do
  /usr/bin/squeue -h -j "$salloc_job" -o %t | grep -q R && break
  sleep 0.1
done
/usr/bin/srun --jobid="$salloc_job" --overlap -n 8 true  # warm
time_n "$dir/s_step" /usr/bin/srun --jobid="$salloc_job" --overlap -n 8 true
/usr/bin/scancel "$salloc_job"; salloc_job=
/usr/bin/srun -Q -p gpu-shared --gres=gpu:1 -t 1 true  # warm
time_n "$dir/s_run" /usr/bin/srun -Q -p gpu-shared --gres=gpu:1 -t 1 true
read -r s_step_m s_step_p < <(stats "$dir/s_step")
read -r s_run_m s_run_p < <(stats "$dir/s_run")
echo "slurm: srun -n 8 true in an allocation: median ${s_step_m} ms, p95 ${s_step_p} ms (N=$N)"
echo "slurm: srun true (its own allocation):  median ${s_run_m} ms, p95 ${s_run_p} ms (N=$N)"
awk -v a="$s_step_m" -v b="$h_step_m" -v c="$s_run_m" -v d="$h_run_m" 'BEGIN {
  printf "ratio (slurm / hachi, medians): step %.1fx, run %.1fx\n", a / b, c / d }'
