#!/usr/bin/env bash
# The controller on SQLite against the controller on PostgreSQL, in one run
# (docs/benchmarks.md, "SQLite against PostgreSQL"): for each store a fresh `hachi server`
# on 127.0.0.1 with NODES `hachi agent` processes (hgx-h100, simulated), then
#   seq     N_SUBMIT sequential `hachi submit -H` (held: nothing runs), submits/s
#   conc    the same N_SUBMIT from CONC parallel loops, submits/s
#   array   one N_ARRAY-task array of trivial 1-GPU jobs, submit to all COMPLETED, s
# and, per phase, the server's own commit cost from GET /metrics
# (hachi_store_commit_seconds: sum/count = the mean a commit took, group commit's wait
# included; count = commits). PostgreSQL is a scratch one on a Unix socket
# (scripts/pg-scratch.sh; fsync on), so both stores pay their fsync on the same disk.
#
#   bench/ha/stores.sh BUILD_DIR                 # ~3-6 min on 2 shared cores
#   N_SUBMIT=500 N_ARRAY=1000 bench/ha/stores.sh build
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: bench/ha/stores.sh BUILD_DIR}
hachi=$(cd "$build" && pwd)/hachi
[ -x "$hachi" ] || { echo "stores: $hachi is not built" >&2; exit 1; }
N_SUBMIT=${N_SUBMIT:-1000}
N_ARRAY=${N_ARRAY:-2000}
CONC=${CONC:-8}
NODES=${NODES:-4}
PORT=${PORT:-18686}
out=$(cd "$build" && pwd)/bench-results
mkdir -p "$out"
tmp=$(mktemp -d /tmp/hachi-stores.XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -d "$tmp/pg/data" ] && "$here/scripts/pg-scratch.sh" stop "$tmp/pg" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
now_ns() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", (b-a)/1e9}'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN{ if (s>0) printf "%.1f", n/s; else print "inf"}'; }
# "SUM COUNT" of hachi_store_commit_seconds now.
commits() {
  curl -s "http://127.0.0.1:$PORT/metrics" | awk '
    /^hachi_store_commit_seconds_sum/ {s=$2} /^hachi_store_commit_seconds_count/ {c=$2}
    END {printf "%s %s\n", s+0, c+0}'
}
# mean ms per commit and commits between two "SUM COUNT" readings
per_commit() {
  awk -v a="$1" -v b="$2" 'BEGIN{split(a,x," "); split(b,y," "); n=y[2]-x[2];
    if (n>0) printf "%.3f %d", (y[1]-x[1])*1000/n, n; else print "- 0"}'
}

start_cluster() {  # $1: sqlite | postgresql
  local store=$1 st=$tmp/$1
  mkdir -p "$st"
  local flags=()
  [ "$store" = postgresql ] && flags=(--store "$pg_uri" --advertise "http://127.0.0.1:$PORT")
  "$hachi" server --state-dir "$st/state" --listen "127.0.0.1:$PORT" "${flags[@]}" \
    >"$st/server.log" 2>&1 &
  pids+=($!)
  export HACHI_SERVER="unix:$st/state/hachi.sock"
  for _ in $(seq 150); do "$hachi" queue >/dev/null 2>&1 && break; sleep 0.2; done
  "$hachi" queue >/dev/null || { cat "$st/server.log" >&2; exit 1; }
  for i in $(seq "$NODES"); do
    "$hachi" agent --server "http://127.0.0.1:$PORT" --name "n$i" --preset hgx-h100 \
      --spool-dir "$st/spool-n$i" --cgroup none \
      --cluster-secret-file "$st/state/cluster-secret" >"$st/agent-n$i.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 150); do
    [ "$("$hachi" nodes -o '%t' | grep -c idle)" -ge "$NODES" ] && return 0
    sleep 0.2
  done
  echo "stores: agents did not come up" >&2; exit 1
}
stop_cluster() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cancel_held() {
  local ids
  ids=$("$hachi" queue -t PD -o %i | tail -n +2 | tr '\n' ' ')
  # shellcheck disable=SC2086
  [ -z "$ids" ] || "$hachi" cancel $ids >/dev/null 2>&1 || true
}
submit_loop() {  # $1: how many
  for _ in $(seq "$1"); do
    "$hachi" submit -H --gres=gpu:1 -t 1 -o /dev/null --wrap true >/dev/null
  done
}

log "scratch PostgreSQL in $tmp/pg"
pg_uri=$("$here/scripts/pg-scratch.sh" start "$tmp/pg" 55432)
declare -A R
for store in sqlite postgresql; do
  log "$store: server + $NODES agents"
  start_cluster "$store"
  a=$(commits); t0=$(now_ns); submit_loop "$N_SUBMIT"; t1=$(now_ns); b=$(commits)
  R[$store.seq]="$(rate "$N_SUBMIT" "$(secs "$t0" "$t1")") $(per_commit "$a" "$b")"
  cancel_held
  per=$((N_SUBMIT / CONC))
  a=$(commits); t0=$(now_ns)
  loops=()
  for _ in $(seq "$CONC"); do submit_loop "$per" & loops+=($!); done
  for p in "${loops[@]}"; do wait "$p"; done
  t1=$(now_ns); b=$(commits)
  R[$store.conc]="$(rate $((per * CONC)) "$(secs "$t0" "$t1")") $(per_commit "$a" "$b")"
  cancel_held
  a=$(commits); t0=$(now_ns)
  "$hachi" submit --array="1-$N_ARRAY" --gres=gpu:1 -t 1 -o /dev/null --wrap true >/dev/null
  for _ in $(seq 3600); do
    [ "$("$hachi" queue -t CD -o %i | tail -n +2 | wc -l)" -ge "$N_ARRAY" ] && break
    sleep 0.25
  done
  t1=$(now_ns); b=$(commits)
  R[$store.array]="$(secs "$t0" "$t1") $(per_commit "$a" "$b")"
  stop_cluster
done

{
  echo "| store | seq submits/s | ms/commit | conc ($CONC) submits/s | ms/commit | commits | ${N_ARRAY}-task array, s | ms/commit | commits |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for store in sqlite postgresql; do
    read -r sr sm _ <<<"${R[$store.seq]}"
    read -r cr cm cn <<<"${R[$store.conc]}"
    read -r as am an <<<"${R[$store.array]}"
    echo "| $store | $sr | $sm | $cr | $cm | $cn | $as | $am | $an |"
  done
  echo
  echo "N_SUBMIT=$N_SUBMIT N_ARRAY=$N_ARRAY NODES=$NODES, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/stores.md"
