#!/usr/bin/env bash
# `make bench`: every Google Benchmark binary in BUILD/bench, results also kept as JSON
# in BUILD/bench-results/. Benchmarks, not tests: the figures are for the docs.
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
[ "$found" = 1 ] || { echo "no benchmarks built in $build/bench" >&2; exit 1; }
