#!/usr/bin/env bash
# The array benchmark (docs/benchmarks.md, "One array of a big script"): one
# `hachi submit --array=0-(TASKS-1)` of a 1 MB batch script on `hachi dev` (one simulated
# 8-GPU node, the tasks held so that none runs) -- or, with ARRAY_PAYLOAD=argv, of
# `-- /bin/echo` with 1 MB of arguments (1000 of 999 bytes) -- measured for each binary in
# the same run:
#   - the server's RSS (VmRSS of the hachi dev process) before and after the submit,
#   - the state's size (hachi.db + hachi.db-wal) before and after,
#   - the submit's wall time, and then that of `hachi queue` (every task listed),
#   - the next start: `hachi dev` again on the same state directory, the time until the API
#     answers (`hachi nodes`), and the RSS then.
# Usage: bench/array_payload.sh NEW_HACHI [TASKS...]      (default TASKS: 10000)
#   ARRAY_PAYLOAD=script|argv                 what is 1 MB (default script)
#   ARRAY_BASELINE=/var/tmp/b16-base/hachi    the binary before the change, run first
#   ARRAY_BASELINE_TASKS="500 1000"           its task counts (default: TASKS); the old
#                                             binary needs ~2 MB of RSS and 1 MB of disk a
#                                             task: check `free -g` and `df -h /var/tmp`
#   ARRAY_TMP=/var/tmp                        where the state directories go
# Prints one Markdown table row per run. Needs ~11 GB of memory for a baseline at 1000.
set -euo pipefail
here=$(cd "$(dirname "$0")/../scripts" && pwd)
new=${1:?usage: bench/array_payload.sh NEW_HACHI [TASKS...]}
shift
tasks_new=("${@:-10000}")
read -r -a tasks_base <<<"${ARRAY_BASELINE_TASKS:-${tasks_new[*]}}"
tmp_root=${ARRAY_TMP:-/var/tmp}
payload=${ARRAY_PAYLOAD:-script}
case $payload in script | argv) ;; *) echo "ARRAY_PAYLOAD: script or argv" >&2; exit 2 ;; esac
# shellcheck source=scripts/dev-cluster.sh
. "$here/dev-cluster.sh"

dev_pid=""
tmp=""
cleanup() {
  if [ -n "$dev_pid" ] && kill -0 "$dev_pid" 2>/dev/null; then
    kill "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
  fi
  [ -z "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
rss_mb() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
state_mb() {  # hachi.db + hachi.db-wal in MB, and hachi.db alone
  local db=0 wal=0
  [ -f "$1/state/hachi.db" ] && db=$(stat -c %s "$1/state/hachi.db")
  [ -f "$1/state/hachi.db-wal" ] && wal=$(stat -c %s "$1/state/hachi.db-wal")
  awk -v d="$db" -v w="$wal" 'BEGIN{printf "%.1f (db %.1f)", (d + w) / 1e6, d / 1e6}'
}
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
stop_dev() {
  kill "$dev_pid"
  wait "$dev_pid" 2>/dev/null || true
  dev_pid=""
}

# A 1,000,000-byte script: a shebang, comment lines, `true`.
make_script() {
  {
    printf '#!/bin/sh\n'
    local line
    line="# $(head -c 97 /dev/zero | tr '\0' x)"
    for _ in $(seq 9998); do printf '%s\n' "$line"; done
    printf '%s\n' "$(head -c 184 /dev/zero | tr '\0' '#')"
    printf 'true\n'
  } >"$1"
}

# 1000 arguments of 999 bytes: 1,000,000 bytes with their NULs, under the API's 1 MiB.
big_argv=()
make_argv() {
  local arg
  arg=$(head -c 999 /dev/zero | tr '\0' a)
  for _ in $(seq 1000); do big_argv+=("$arg"); done
}

run() {  # label hachi tasks
  local label=$1 hachi=$2 tasks=$3 t0 rss0 st0 rss1 st1 submit_ms queue_ms start_ms rss2
  local what
  tmp=$(mktemp -d "$tmp_root/hachi-array-XXXXXX")
  make_script "$tmp/big.sh"
  cd "$tmp"
  start_dev "$hachi" "$tmp" 1 hgx-h100 150 array-payload
  sleep 1
  rss0=$(rss_mb "$dev_pid")
  st0=$(state_mb "$tmp")
  if [ "$payload" = argv ]; then
    [ "${#big_argv[@]}" -gt 0 ] || make_argv
    what="-- /bin/echo with ${#big_argv[@]} arguments"
    set -- /bin/echo "${big_argv[@]}"
  else
    what="of a $(stat -c %s big.sh)-byte script"
    set -- big.sh
  fi
  log "$label: submitting --array=0-$((tasks - 1)) $what"
  t0=$(date +%s%N)
  if [ "$payload" = argv ]; then
    "$hachi" submit --hold --gpus=1 -t 1 -o /dev/null "--array=0-$((tasks - 1))" -- "$@" >/dev/null
  else
    "$hachi" submit --hold --gpus=1 -t 1 -o /dev/null "--array=0-$((tasks - 1))" "$@" >/dev/null
  fi
  submit_ms=$(ms_since "$t0")
  sleep 2  # the loop's next cycle and trim
  rss1=$(rss_mb "$dev_pid")
  st1=$(state_mb "$tmp")
  t0=$(date +%s%N)
  if timeout 120 "$hachi" queue >/dev/null; then queue_ms="$(ms_since "$t0") ms"; else queue_ms="failed ($?)"; fi
  stop_dev
  # The next start: until the API answers.
  t0=$(date +%s%N)
  "$hachi" dev --nodes 1 --preset hgx-h100 --state-dir "$tmp/state" --listen 127.0.0.1:0 \
    2>"$tmp/dev2.log" &
  dev_pid=$!
  start_ms=""
  for _ in $(seq 3000); do  # 5 min at most
    if "$hachi" nodes >/dev/null 2>&1; then
      start_ms=$(ms_since "$t0")
      break
    fi
    kill -0 "$dev_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$start_ms" ] || { echo "array-payload: the restart did not answer" >&2; cat "$tmp/dev2.log" >&2; exit 1; }
  rss2=$(rss_mb "$dev_pid")
  stop_dev
  cd /
  rm -rf "$tmp"
  tmp=""
  printf '| %s | %s | %d | %d → %d MB (+%d) | %s → %s | %d ms | %s | %d ms | %d MB |\n' \
    "$label" "$payload" "$tasks" "$rss0" "$rss1" $((rss1 - rss0)) "$st0" "$st1" \
    "$submit_ms" "$queue_ms" "$start_ms" "$rss2"
}

echo "| binary | 1 MB of | tasks | server RSS before → after | state (db + wal) before → after, MB | submit | hachi queue | next start (API answers) | RSS after restart |"
echo "|---|---|---|---|---|---|---|---|---|"
if [ -n "${ARRAY_BASELINE:-}" ]; then
  for n in "${tasks_base[@]}"; do run "baseline" "$ARRAY_BASELINE" "$n"; done
fi
for n in "${tasks_new[@]}"; do run "new" "$new" "$n"; done
