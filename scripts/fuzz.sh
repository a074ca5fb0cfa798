#!/usr/bin/env bash
# Runs each libFuzzer target (fuzz/, README.md "Fuzzing") for a bounded time, seeded with
# its corpus in fuzz/corpus/<target>/ (and, for the nvidia-smi readers, testdata/). The
# corpus is copied to a temporary directory first, so new units never land in the repo.
# Prints one line per target; a crash, leak, sanitizer report, hang (-timeout) or memory
# blow-up (-rss_limit_mb) prints the report, leaves the input as ./<target>-crash-* (or
# -leak-, -timeout-, -oom-) and makes the script fail once every target has run.
# usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
set -uo pipefail
build=$1
secs=${2:-60}
shift 2 || shift $#
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_job_spec fuzz_directives fuzz_config fuzz_nvidia_smi fuzz_trace)
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# UBSan reports abort (libFuzzer then saves the input); LeakSanitizer is ASan's default.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1

failed=0
for t in "${targets[@]}"; do
  bin="$build/fuzz/$t"
  if [ ! -x "$bin" ]; then
    echo "$t: FAILED (no binary at $bin)"
    failed=1
    continue
  fi
  corpus="$work/$t"
  mkdir -p "$corpus"
  [ -d "$root/fuzz/corpus/$t" ] && cp "$root/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null
  [ "$t" = fuzz_nvidia_smi ] && cp "$root"/testdata/nvidia-smi/*.txt "$corpus"/
  args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1
        -max_len=16384 -print_final_stats=1 -artifact_prefix="./$t-")
  [ -f "$root/fuzz/dict/$t.dict" ] && args+=(-dict="$root/fuzz/dict/$t.dict")
  log="$work/$t.log"
  "$bin" "${args[@]}" "$corpus" >"$log" 2>&1
  rc=$?
  figure() { grep -m1 "^stat::$1:" "$log" | awk '{print $2}'; }
  runs=$(figure number_of_executed_units)
  line="$t: ${runs:-0} runs in ${secs}s, $(figure new_units_added) new units, peak RSS $(figure peak_rss_mb) MB"
  if [ $rc -ne 0 ]; then
    # The report, from its first line (sanitizer, invariant, exception, libFuzzer's own
    # timeout / OOM / leak) on; else the end of the log.
    report=$(awk '/ERROR|runtime error|invariant failed|terminate called/ {p = 1} p' "$log")
    if [ -n "$report" ]; then echo "$report" | head -n 200; else tail -n 40 "$log"; fi
    echo "$line: FAILED (exit $rc; input saved as ./$t-*)"
    failed=1
  else
    echo "$line: ok"
  fi
done
exit $failed
