# Sourced by the benchmark scripts (server-bench.sh, soak.sh): start_dev HACHI DIR NODES
# PRESET WAIT_TENTHS NAME starts `hachi dev` on 127.0.0.1 with its state in DIR/state and
# its log in DIR/dev.log, waits until it listens and NODES nodes registered (WAIT_TENTHS
# tenths of a second each), and sets dev_pid and url (TCP) and exports HACHI_SERVER (the
# Unix socket, where the CLI needs no token: docs/api.md "Authentication"). On failure it
# prints why (prefixed with NAME) and exits 1.
start_dev() {
  local hachi=$1 dir=$2 nodes=$3 preset=$4 tenths=$5 name=$6 up=0
  "$hachi" dev --nodes "$nodes" --preset "$preset" --state-dir "$dir/state" \
    --listen 127.0.0.1:0 2>"$dir/dev.log" &
  dev_pid=$!
  url=""
  for _ in $(seq 150); do
    url=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$dir/dev.log" | head -1 | cut -d' ' -f3 || true)
    [ -n "$url" ] && break
    kill -0 "$dev_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "$name: hachi dev did not start:" >&2; cat "$dir/dev.log" >&2; exit 1; }
  export HACHI_SERVER=unix:$dir/state/hachi.sock
  for _ in $(seq "$tenths"); do
    up=$("$hachi" nodes -o %n 2>/dev/null | grep -c "^node" || true)
    [ "$up" -ge "$nodes" ] && break
    sleep 0.1
  done
  [ "$up" -ge "$nodes" ] || { echo "$name: only $up/$nodes nodes registered" >&2; exit 1; }
}
