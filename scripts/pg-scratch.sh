#!/usr/bin/env bash
# A throwaway PostgreSQL 15 (Debian's postgresql-15) for benchmarks and by-hand tries of
# `hachi server --store` (docs/ha.md). Never the system's cluster: initdb in DIR, the
# Unix socket in DIR, listening on no TCP address, trust authentication for the socket;
# run as `nobody` when called as root (PostgreSQL refuses to run as root).
#
#   scripts/pg-scratch.sh start DIR [PORT]   prints the store's URI on stdout
#   scripts/pg-scratch.sh stop DIR           fast shutdown; DIR is left for the caller
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
cmd=${1:?usage: pg-scratch.sh start|stop DIR [PORT]}
dir=${2:?usage: pg-scratch.sh start|stop DIR [PORT]}
port=${3:-5432}
[ -x "$bin/pg_ctl" ] || { echo "pg-scratch: $bin/pg_ctl missing (apt-get install postgresql-15)" >&2; exit 1; }
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}
case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown nobody:nogroup "$dir"
    as_pg "$bin/initdb" -D "$dir/data" -A trust -U hachi -E UTF8 --locale=C --no-sync >"$dir/initdb.log"
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 30 \
      -o "-c listen_addresses='' -c unix_socket_directories='$dir' -p $port -c fsync=on" start >/dev/null
    as_pg "$bin/createdb" -h "$dir" -p "$port" -U hachi hachi
    # libpq URIs take a socket directory as the host, percent-encoded.
    enc=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$dir")
    echo "postgresql://hachi@${enc}:${port}/hachi"
    ;;
  stop)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null
    ;;
  *) echo "pg-scratch: unknown command $cmd" >&2; exit 2 ;;
esac
