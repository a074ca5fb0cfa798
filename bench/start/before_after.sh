#!/usr/bin/env bash
# Two builds' process starts side by side in one run (docs/benchmarks.md, "Process start"):
# `perf stat -r 50 -e task-clock,page-faults` of /bin/true, an empty C++ program, and each
# build's `hachi --version`, job waiter start and held `hachi submit -H` (against a
# `hachi dev` of the NEW build), ROUNDS rounds, then each one's instructions (callgrind).
#
#   bench/start/before_after.sh OLD_BUILD_DIR NEW_BUILD_DIR
# A build without hachi-job-waiter (before it existed) is measured as `hachi __job-waiter`.
set -euo pipefail
old=$(cd "${1:?usage: before_after.sh OLD_BUILD NEW_BUILD}" && pwd)
new=$(cd "${2:?usage: before_after.sh OLD_BUILD NEW_BUILD}" && pwd)
ROUNDS=${ROUNDS:-2}
tmp=$(mktemp -d /tmp/hachi-before-after.XXXXXX)
dev=""
cleanup() {
  if [ -n "$dev" ]; then kill "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
printf 'int main() {}\n' >"$tmp/empty.cc"
"${CXX:-c++}" -O3 -static-libstdc++ -static-libgcc "$tmp/empty.cc" -o "$tmp/empty"
"$new/hachi" dev --nodes 1 --state-dir "$tmp/state" --listen 127.0.0.1:0 2>"$tmp/dev.log" &
dev=$!
for _ in $(seq 100); do [ -S "$tmp/state/hachi.sock" ] && break; sleep 0.1; done
env=(env -i PATH=/usr/bin:/bin HOME="$tmp" HACHI_SERVER="unix:$tmp/state/hachi.sock")
waiter() {  # build dir -> the waiter's argv
  if [ -x "$1/hachi-job-waiter" ]; then echo "$1/hachi-job-waiter __job-waiter"
  else echo "$1/hachi __job-waiter"; fi
}
submit="submit -H --gres=gpu:1 -t 1 -o /dev/null --wrap true"
commands=("/bin/true" "$tmp/empty"
  "$old/hachi --version" "$new/hachi --version"
  "$(waiter "$old")" "$(waiter "$new")"
  "$old/hachi $submit" "$new/hachi $submit")
names=("/bin/true" "empty C++ program" "hachi --version, before" "hachi --version, after"
  "job waiter's start, before" "job waiter's start, after"
  "hachi submit -H, before" "hachi submit -H, after")
echo "| command | instructions | task clock (ms), each round | page faults, each round |"
echo "|---|---|---|---|"
declare -A clock faults
for ((r = 0; r < ROUNDS; r++)); do
  for i in "${!commands[@]}"; do
    # shellcheck disable=SC2086  # the command's words
    out=$("${env[@]}" perf stat -r 50 -x, -e task-clock,page-faults ${commands[$i]} 2>&1 \
      >/dev/null | grep -E ',(task-clock|page-faults),' || true)
    clock[$i]+="$(echo "$out" | awk -F, '/task-clock/ {printf "%.2f ", $1}')"
    faults[$i]+="$(echo "$out" | awk -F, '/page-faults/ {printf "%d ", $1}')"
  done
done
for i in "${!commands[@]}"; do
  # shellcheck disable=SC2086
  ir=$("${env[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    ${commands[$i]} 2>&1 >/dev/null | grep -o 'Collected : [0-9]*' | cut -d' ' -f3 || true)
  echo "| ${names[$i]} | $ir | ${clock[$i]}| ${faults[$i]}|"
done
