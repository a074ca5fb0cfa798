#!/usr/bin/env bash
# Runs the nvidia-smi reader fuzzer for a while, seeded with the real fixtures.
# usage: scripts/fuzz.sh BUILD_DIR SECONDS
set -euo pipefail
build=$1
secs=${2:-60}
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp testdata/nvidia-smi/*.txt "$corpus"/
"$build/fuzz/fuzz_nvidia_smi" -max_total_time="$secs" -max_len=16384 -timeout=10 \
  -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
