#!/usr/bin/env bash
# Runs the nvidia-smi reader fuzzer for a while, seeded with the real fixtures. A crash
# prints the whole report and leaves the input as crash-* in the current directory.
# usage: scripts/fuzz.sh BUILD_DIR SECONDS
set -uo pipefail
build=$1
secs=${2:-60}
corpus=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$corpus" "$log"' EXIT
cp testdata/nvidia-smi/*.txt "$corpus"/
echo "fuzzing the nvidia-smi readers for ${secs}s"
"$build/fuzz/fuzz_nvidia_smi" -max_total_time="$secs" -max_len=16384 -timeout=10 \
  -print_final_stats=1 "$corpus" >"$log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  cat "$log"
  echo "fuzz: FAILED (exit $rc)"
  exit 1
fi
grep -E "^(Done|stat::number_of_executed_units|stat::new_units_added)" "$log"
echo "fuzz: no crash"
