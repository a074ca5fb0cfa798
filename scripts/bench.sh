#!/usr/bin/env bash
# `make bench`: every Google Benchmark binary in BUILD/bench and the Philly replay of
# `hachi sim`, results also kept as JSON in BUILD/bench-results/. Benchmarks, not tests: the figures are for the docs.
set -euo pipefail
build=${1:-build}
out="$build/bench-results"
mkdir -p "$out"
found=0
for b in "$build"/bench/*_bench; do
  [ -x "$b" ] || continue
  found=1
  name=$(basename "$b")
  echo "==> $name"
  "$b" --benchmark_out="$out/$name.json" --benchmark_out_format=json
done
# The Philly replay (docs/sim.md): the whole trace with each policy on the default
# cluster, one JSON object per policy kept next to the benchmarks'.
root=$(cd "$(dirname "$0")/.." && pwd)
philly=${HACHI_SHARED_DIR:-$root/../shared}/traces/philly-atc19/philly_jobs_pollux.csv
if [ ! -f "$philly" ]; then
  echo "==> hachi sim: skipped, no Philly trace at $philly (set HACHI_SHARED_DIR)"
elif [ ! -x "$build/hachi" ]; then
  echo "==> hachi sim: skipped, $build/hachi is not built"
else
  for policy in fifo easy hachi; do
    echo "==> hachi sim --policy $policy (Philly, 96x8:hgx-h100)"
    # Progress lines go to a log, shown only when the run fails.
    if ! "$build/hachi" sim --trace "$philly" --policy "$policy" --json \
      >"$out/sim_philly_$policy.json" 2>"$out/sim_philly_$policy.log"; then
      cat "$out/sim_philly_$policy.log" >&2
      exit 1
    fi
    if command -v jq >/dev/null; then
      jq -r '"jobs \(.jobs)  wait mean \(.wait_mean_s|floor) s  p50 \(.wait_p50_s) s  " +
        "p95 \(.wait_p95_s) s  p99 \(.wait_p99_s) s  8-GPU p95 \(.wait_p95_s_by_gpus["8"]) s  " +
        "util \(.gpu_utilization*1000|floor/10) %  cycle p99 \(.cycle_ms_p99) ms  " +
        "wall \(.wall_s*100|floor/100) s"' "$out/sim_philly_$policy.json"
    else
      cat "$out/sim_philly_$policy.json"
    fi
  done
fi
# FGD's placement benchmark on the openb trace (docs/benchmarks.md): ~2-4 min.
if [ -d "${HACHI_SHARED_DIR:-$root/../shared}/traces/alibaba-openb-gpu-v2023" ]; then
  echo "==> fgd placement (scripts/fgd-bench.sh)"
  "$root/scripts/fgd-bench.sh" "$build/hachi" | tee "$out/fgd_placement.md"
fi
# What a process start costs (docs/benchmarks.md, "Process start"): hachi --version, the
# job waiter and a held submit against an empty C++ program measured in the same run;
# fails when one is over its budget (bench/start/start_cost.py).
if [ -x "$build/hachi" ]; then
  echo "==> process start (bench/start/start_cost.py)"
  "$root/bench/start/start_cost.py" "$build" | tee "$out/start_cost.md"
fi
# The running system against Slurm (docs/benchmarks.md, "The running system against
# Slurm"): hachi dev with 4 simulated 8-GPU nodes, the Slurm baseline's job shapes; ~1-2 min.
if [ -x "$build/hachi" ]; then
  echo "==> server bench (scripts/server-bench.sh)"
  "$root/scripts/server-bench.sh" "$build"
fi
# One array of a 1 MB script (docs/benchmarks.md, "One array of a big script"): RSS, state
# size and the next start; with ARRAY_BASELINE=OLD_HACHI the old binary too, same run.
if [ -x "$build/hachi" ]; then
  echo "==> array payload (bench/array_payload.sh)"
  "$root/bench/array_payload.sh" "$build/hachi" | tee "$out/array_payload.md"
fi
# The fleet under faults at the issue's full figures (src/cli/faults_e2e_test.cc): 200 jobs
# through 30 % loss + 200 ms for 2 minutes, the server down 10 minutes, an agent down 70 s
# with the default 30 s lease. About 20 minutes and root only, so asked for by
# HACHI_BENCH_FAULTS=1; `make test` runs the same tests at short timings.
faults="$build/src/cli/cli_faults_e2e_test"
if [ "${HACHI_BENCH_FAULTS:-0}" != 1 ]; then
  echo "==> fleet under faults: skipped (HACHI_BENCH_FAULTS=1 runs it, ~20 min, root)"
elif [ ! -x "$faults" ] || [ "$(id -u)" != 0 ]; then
  echo "==> fleet under faults: skipped, needs root and $faults built"
else
  echo "==> fleet under faults, full figures (cli_faults_e2e_test)"
  # A failing test is a finding, not a broken bench: its output is kept and the rest runs.
  HACHI_FAULTS_JOBS=200 HACHI_FAULTS_LOSSY_S=120 HACHI_FAULTS_OUTAGE_S=600 \
    HACHI_FAULTS_AGENT_DOWN_S=70 HACHI_FAULTS_LEASE_S=30 \
    "$faults" --gtest_filter='Faults.LossyLinkUnderLoad:Faults.ServerDownKeepsJobsRunning:Faults.AgentKilledRunsNothingTwice' \
    | tee "$out/faults_full.log" || echo "==> fleet under faults: some failed ($out/faults_full.log)"
fi
# Several controllers (docs/ha.md): SQLite against PostgreSQL in one run, then every
# failover case at the default lease and at 3 s (src/cli/ha_e2e_test.cc; root only).
if [ -x "$build/hachi" ] && [ -x /usr/lib/postgresql/15/bin/pg_ctl ]; then
  echo "==> SQLite against PostgreSQL (bench/ha/stores.sh)"
  "$root/bench/ha/stores.sh" "$build" || echo "==> stores: failed"
fi
ha="$build/src/cli/cli_ha_e2e_test"
if [ -x "$ha" ] && [ "$(id -u)" = 0 ]; then
  echo "==> failover under load (cli_ha_e2e_test), default lease and 3 s"
  rm -f "$out/failover.txt"
  HACHI_HA_ALL=1 HACHI_HA_RESULTS="$out/failover.txt" "$ha" | tee "$out/failover.log" ||
    echo "==> failover: some failed ($out/failover.log)"
  HACHI_HA_ALL=1 HACHI_HA_LEASE_S=3 HACHI_HA_RESULTS="$out/failover.txt" "$ha" |
    tee -a "$out/failover.log" || echo "==> failover (3 s): some failed"
fi
[ "$found" = 1 ] || { echo "no benchmarks built in $build/bench" >&2; exit 1; }
