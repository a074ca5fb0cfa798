#!/usr/bin/env bash
# make package-test (part of make test): the Debian packages as an admin meets them.
#   1. contents: dpkg-deb -I/-c of both packages (files, modes, links, conffiles,
#      maintainer scripts, Depends/Conflicts), the Slurm names against kSlurmNames;
#   2. install: both into a throwaway root R (dpkg --root R --force-script-chrootless:
#      the maintainer scripts run here with DPKG_ROOT=R and change R alone): the system
#      user in R's passwd, R/var/lib/hachi 0700 its own; Conflicts keep the Slurm names
#      off a machine with Slurm's clients; a reinstall keeps an edited conffile;
#   3. systemd-analyze verify and security --offline of the installed units, in a root
#      with the host's units beside R's (systemd need not run);
#   4. run: the units' ExecStart lines, paths mapped into R and their EnvironmentFile
#      read, start a server (as the uid R gave hachi, with the unit's UMask and
#      NoNewPrivileges, its socket in R/run/hachi as RuntimeDirectory= would make it)
#      and an agent (root, a simulated node); R's sbatch submits a job, which completes
#      with its output;
#   5. purge: both packages leave nothing in R but what dpkg itself keeps.
# Usage: scripts/package-test.sh BUILD_DIR (its deb/ holds the packages `make package`
# made). Needs root (skipped otherwise, saying so). Every wait is bounded; it stops only
# the processes it started (and any job waiter they left), by pid; R is removed.
set -euo pipefail
build=$(realpath "${1:?usage: package-test.sh BUILD_DIR}")
src=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
say() { printf 'package-test: %s\n' "$*"; }
fail() { printf 'package-test: FAIL: %s\n' "$*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  say "skipped: needs root (dpkg --root, a server run as the hachi user)"
  exit 0
fi
shopt -s nullglob
found=("$build"/deb/hachi_*.deb "$build"/deb/hachi-slurm-compat_*.deb)
if [ ${#found[@]} -ne 2 ] || [[ "${found[1]}" != */hachi-slurm-compat_* ]]; then
  fail "expected one hachi_*.deb and one hachi-slurm-compat_*.deb in $build/deb (make package)"
fi
deb=${found[0]} compat=${found[1]}

tmp=$(mktemp -d /tmp/hachi-pkg-XXXXXX)
R=$tmp/root
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  # Job waiters outlive their agent by design: any process still running R's binaries is
  # one this test started.
  for p in /proc/[0-9]*; do
    case "$(readlink "$p/exe" 2>/dev/null)" in
      "$R"/usr/bin/hachi* | "$R"/usr/lib/hachi/*) kill -KILL "${p#/proc/}" 2>/dev/null || true ;;
    esac
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- 1. contents ----------------------------------------------------------------------
field() { dpkg-deb -f "$1" "$2"; }
version=$(field "$deb" Version)
[ "$(field "$deb" Package)" = hachi ] || fail "$deb is not package hachi"
[ "$(field "$compat" Package)" = hachi-slurm-compat ] || fail "$compat is not hachi-slurm-compat"
[ "$(field "$compat" Version)" = "$version" ] || fail "the two packages' versions differ"
depends=$(field "$deb" Depends)
case "$depends" in *libc6*) ;; *) fail "hachi's Depends has no libc6 (dpkg-shlibdeps): $depends" ;; esac
case "$depends" in *libssl3*) ;; *) fail "hachi's Depends has no libssl3 (TLS, dlopen): $depends" ;; esac
[[ "$(field "$compat" Depends)" == *"hachi (= $version)"* ]] ||
  fail "hachi-slurm-compat must depend on hachi (= $version): $(field "$compat" Depends)"
[[ "$(field "$compat" Conflicts)" == *slurm-client* ]] ||
  fail "hachi-slurm-compat must conflict with slurm-client"
say "hachi $version: Depends: $depends"

listing=$tmp/hachi.list
dpkg-deb -c "$deb" | awk '{print $1, $2, $6, $7, $8}' >"$listing"
want_file() {  # MODE PATH
  grep -qE "^$1 root/root \\./${2#/}( |$)" "$listing" || fail "hachi lacks $2 with mode $1"
}
want_file -rwxr-xr-x /usr/bin/hachi
want_file -rwxr-xr-x /usr/lib/hachi/hachi-job-waiter  # what the agent runs each job under
for f in /lib/systemd/system/hachi-server.service /lib/systemd/system/hachi-agent.service \
  /etc/hachi/hachi.toml /etc/default/hachi-server /etc/default/hachi-agent \
  /usr/lib/sysusers.d/hachi.conf /usr/lib/tmpfiles.d/hachi.conf \
  /usr/share/man/man1/hachi.1.gz /usr/share/doc/hachi/copyright \
  /usr/share/doc/hachi/changelog.Debian.gz /usr/share/doc/hachi/README.md \
  /usr/share/doc/hachi/docs/install.md; do
  want_file -rw-r--r-- "$f"
done
if grep -q '\./var/lib/hachi' "$listing"; then
  fail "hachi ships /var/lib/hachi (postinst makes it: dpkg would reset its owner)"
fi
conffiles=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles)
[ "$conffiles" = "$(printf '/etc/hachi/hachi.toml\n/etc/default/hachi-server\n/etc/default/hachi-agent')" ] ||
  fail "conffiles: $conffiles"
# (Listings go to files first: grep -q closing a pipe early would fail it, pipefail.)
dpkg-deb --ctrl-tarfile "$deb" | tar -tvf - >"$tmp/control.list"
for s in postinst prerm postrm; do
  grep -qE "^-rwxr-xr-x .* \./$s$" "$tmp/control.list" || fail "maintainer script $s missing or not 0755"
done
# The Slurm names: exactly the ones main.cc answers to (cli/slurm/slurm_cmds.h).
names=$(sed -n '/kSlurmNames\[\]/,/};/p' "$src/src/cli/slurm/slurm_cmds.h" |
  grep -o '"[a-z]*"' | tr -d '"' | sort | tr '\n' ' ')
[ -n "$names" ] || fail "no kSlurmNames in src/cli/slurm/slurm_cmds.h"
dpkg-deb -c "$compat" >"$tmp/compat.list"
links=$(awk '$1 ~ /^l/ && $6 ~ /^\.\/usr\/bin\// {print $6, $8}' "$tmp/compat.list")
got=$(awk '{sub("./usr/bin/", "", $1); print $1}' <<<"$links" | sort | tr '\n' ' ')
[ "$got" = "$names" ] || fail "hachi-slurm-compat links '$got', the binary answers to '$names'"
awk '$2 != "hachi" {bad = 1} END {exit bad}' <<<"$links" || fail "a Slurm link not to hachi: $links"
for n in $names; do
  grep -q "\./usr/share/man/man1/$n\.1\.gz" "$tmp/compat.list" || fail "no man page for $n"
done
man_text=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/share/man/man1/hachi.1.gz | gzip -dc)
for section in 'hachi server' 'hachi agent' 'hachi submit' 'hachi topo show'; do
  grep -q "^\.SS \"$section\"" <<<"$man_text" || fail "hachi(1) has no section for '$section'"
done
say "contents ok: $(wc -l <"$listing") entries in hachi, $(wc -w <<<"$names") Slurm names"

# ---- 2. install into R ----------------------------------------------------------------
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/triggers"
touch "$R/var/lib/dpkg/status" "$R/var/lib/dpkg/available"
chmod 0755 "$tmp" "$R"  # the server runs as hachi's uid below, and must reach R's files
# R has no libc6 or systemd of its own: those dependencies are the host's.
dpkg_r() { dpkg --root="$R" --force-script-chrootless --force-depends --log=/dev/null "$@"; }

# A real Slurm client in R first: the Slurm names must not be installed over it.
fake=$tmp/slurm-client
mkdir -p "$fake/DEBIAN" "$fake/usr/bin"
printf 'Package: slurm-client\nVersion: 22.05.8-4\nArchitecture: all\nMaintainer: test <t@t.invalid>\nDescription: test stand-in\n' \
  >"$fake/DEBIAN/control"
printf '#!/bin/sh\n' >"$fake/usr/bin/sbatch"
chmod 0755 "$fake/usr/bin/sbatch"
dpkg-deb --root-owner-group -b "$fake" "$tmp/slurm-client.deb" >/dev/null
dpkg_r -i "$tmp/slurm-client.deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "installing a stand-in slurm-client"; }
if dpkg_r -i "$deb" "$compat" >"$tmp/dpkg.log" 2>&1; then
  fail "hachi-slurm-compat installed beside slurm-client"
fi
grep -q "conflicts with slurm-client" "$tmp/dpkg.log" || { cat "$tmp/dpkg.log"; fail "no conflict reported"; }
[ "$(cat "$R/usr/bin/sbatch")" = '#!/bin/sh' ] || fail "slurm-client's sbatch was replaced"
dpkg_r --purge slurm-client hachi >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "removing slurm-client"; }

dpkg_r -i "$deb" "$compat" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
for p in hachi hachi-slurm-compat; do
  dpkg --root="$R" -s "$p" | grep '^Status: install ok installed' >/dev/null || fail "$p is not installed"
done
uid=$(awk -F: '$1 == "hachi" {print $3}' "$R/etc/passwd" 2>/dev/null)
gid=$(awk -F: '$1 == "hachi" {print $4}' "$R/etc/passwd" 2>/dev/null)
if [ -z "$uid" ] || [ "$uid" -eq 0 ] || [ "$uid" -ge 1000 ]; then
  fail "postinst made no system user hachi in R/etc/passwd"
fi
grep -q '^hachi:' "$R/etc/group" || fail "postinst made no group hachi"
[ "$(stat -c '%a %u %g' "$R/var/lib/hachi")" = "700 $uid $gid" ] ||
  fail "R/var/lib/hachi is $(stat -c '%a %u %g' "$R/var/lib/hachi"), not 700 $uid $gid"
[ "$(readlink "$R/usr/bin/srun")" = hachi ] || fail "R/usr/bin/srun is not a link to hachi"
for n in $names; do
  "$R/usr/bin/$n" --help >/dev/null 2>&1 || fail "$n --help failed (the binary does not answer to $n)"
done
# A reinstall (an upgrade's path through the scripts) keeps an edited conffile.
echo '# edited by package-test' >>"$R/etc/default/hachi-agent"
dpkg_r --force-confold -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "reinstall"; }
tail -n 1 "$R/etc/default/hachi-agent" | grep 'edited by package-test' >/dev/null || fail "the reinstall lost an edit"
say "installed into R: user hachi uid $uid, R/var/lib/hachi 0700; Conflicts and conffiles ok"

# ---- 3. systemd-analyze verify --------------------------------------------------------
# Against a root V holding the host's own units (the targets ours name: R has none) and
# R's units and binary; the man page of Documentation= is looked up in R's man pages.
# verify says most problems (an unknown key, a bad value) on stderr and still exits 0:
# any line that names hachi fails the test.
V=$tmp/verify
mkdir -p "$V/lib/systemd/system" "$V/usr/bin"
cp -a /lib/systemd/system/. "$V/lib/systemd/system/"
cp "$R"/lib/systemd/system/hachi-*.service "$V/lib/systemd/system/"
ln "$R/usr/bin/hachi" "$V/usr/bin/hachi"
units=(/lib/systemd/system/hachi-server.service /lib/systemd/system/hachi-agent.service)
verify=$(MANPATH="$R/usr/share/man" systemd-analyze verify --root="$V" "${units[@]}" 2>&1) ||
  { printf '%s\n' "$verify" >&2; fail "systemd-analyze verify failed"; }
if grep -qi hachi <<<"$verify"; then
  printf '%s\n' "$verify" >&2
  fail "systemd-analyze verify complains about the units"
fi
# The server's sandbox, as systemd scores it (0 best, 10 worst); a weakened one fails.
exposure=$(systemd-analyze security --offline=yes --root="$V" --threshold=20 "${units[0]}" 2>&1) ||
  { printf '%s\n' "$exposure" >&2; fail "hachi-server.service's exposure is over 2.0"; }
say "systemd-analyze verify: both units clean; $(grep -o 'Overall exposure level.*' <<<"$exposure")"

# ---- 4. run the units' commands from R ------------------------------------------------
unit_value() {  # UNIT KEY: the key's last value
  sed -n "s/^$2=//p" "$R/lib/systemd/system/$1" | tail -n 1
}
# The unit's EnvironmentFile (a leading - : optional), read as systemd does for plain
# KEY=value lines: into env_args as KEY=value words, later lines winning.
read_env_file() {
  local f=${1#-}
  env_args=()
  [ -f "$R$f" ] || return 0
  local line
  while IFS= read -r line; do
    [[ "$line" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] && env_args+=("$line")
  done <"$R$f"
}
env_value() {  # NAME from env_args (the last)
  local v="" kv
  for kv in "${env_args[@]}"; do [ "${kv%%=*}" = "$1" ] && v=${kv#*=}; done
  printf '%s' "$v"
}
# ExecStart's words: $NAME is the variable's words, an absolute path is R's.
exec_words() {
  local w
  cmd=()
  for w in $1; do
    case "$w" in
      \$*) read -r -a more <<<"$(env_value "${w#\$}")"; cmd+=("${more[@]}") ;;
      /*) cmd+=("$R$w") ;;
      *) cmd+=("$w") ;;
    esac
  done
}
path_env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# The server: its EnvironmentFile opens the TCP port on a free one (flags win).
echo 'HACHI_SERVER_OPTS=--listen 127.0.0.1:0' >>"$R/etc/default/hachi-server"
[ "$(unit_value hachi-server.service User)" = hachi ] || fail "hachi-server.service does not run as hachi"
[ "$(unit_value hachi-server.service UMask)" = 0077 ] || fail "hachi-server.service UMask"
read_env_file "$(unit_value hachi-server.service EnvironmentFile)"
exec_words "$(unit_value hachi-server.service ExecStart)"
# RuntimeDirectory=hachi, RuntimeDirectoryMode=0755, owned by User=.
install -d -m 0755 -o "$uid" -g "$gid" "$R/run/hachi"
sock=$R/run/hachi/hachi.sock
( umask 0077
  exec env -i "$path_env" HOME=/var/lib/hachi USER=hachi LOGNAME=hachi "${env_args[@]}" \
    setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs "${cmd[@]}" ) \
  >"$tmp/server.log" 2>&1 &
pids+=($!)
say "server: ${cmd[*]#$R} (as uid $uid)"
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { cat "$tmp/server.log"; fail "the server made no socket at $sock in 10 s"; }
[ "$(stat -c '%a %u' "$R/var/lib/hachi")" = "700 $uid" ] || fail "the state directory is not 0700 after the start"
[ "$(stat -c '%a' "$R/var/lib/hachi/cluster-secret")" = 600 ] || fail "the cluster secret is not 0600"

# The agent (root, as its unit has no User=): the admin's lines in /etc/default/hachi-agent.
cat >>"$R/etc/default/hachi-agent" <<EOF
HACHI_SERVER=unix:$sock
HACHI_CLUSTER_SECRET_FILE=$R/var/lib/hachi/cluster-secret
HACHI_AGENT_OPTS=--preset hgx-h100 --name pkgtest --spool-dir $R/var/spool/hachi --cgroup none
EOF
[ "$(unit_value hachi-agent.service KillMode)" = process ] || fail "hachi-agent.service KillMode"
read_env_file "$(unit_value hachi-agent.service EnvironmentFile)"
exec_words "$(unit_value hachi-agent.service ExecStart)"
env -i "$path_env" "${env_args[@]}" "${cmd[@]}" >"$tmp/agent.log" 2>&1 &
pids+=($!)
say "agent: ${cmd[*]#$R}"

client() { env -i "$path_env" HOME="$tmp" HACHI_SERVER="unix:$sock" "$@"; }
for _ in $(seq 100); do
  client "$R/usr/bin/hachi" nodes 2>/dev/null | grep pkgtest >/dev/null && break
  sleep 0.1
done
client "$R/usr/bin/hachi" nodes 2>/dev/null | grep pkgtest >/dev/null ||
  { cat "$tmp/server.log" "$tmp/agent.log"; fail "the agent's node did not register in 10 s"; }

mkdir -m 0755 "$tmp/work"
# shellcheck disable=SC2016  # the job's shell expands them
job=$(cd "$tmp/work" && client "$R/usr/bin/sbatch" --parsable --gpus 1 -t 1:00 -J pkgtest -o 'out-%j.txt' \
  --wrap 'echo "hello from $SLURM_JOB_ID on $SLURMD_NODENAME"') ||
  { cat "$tmp/server.log"; fail "sbatch"; }
[[ "$job" =~ ^[0-9]+$ ]] || fail "sbatch --parsable printed '$job'"
state=""
for _ in $(seq 300); do
  state=$(client "$R/usr/bin/hachi" show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' || true)
  case "$state" in JobState=COMPLETED | JobState=FAILED | JobState=CANCELLED | JobState=*FAIL*) break ;; esac
  sleep 0.1
done
[ "$state" = JobState=COMPLETED ] ||
  { client "$R/usr/bin/hachi" show job "$job" || true; cat "$tmp/agent.log"; fail "job $job: $state after 30 s"; }
out=$tmp/work/out-$job.txt
[ "$(cat "$out" 2>/dev/null)" = "hello from $job on pkgtest" ] ||
  { client "$R/usr/bin/hachi" show job "$job" || true; ls -la "$tmp/work"; cat "$tmp/agent.log"
    fail "job $job's output in $out: '$(cat "$out" 2>/dev/null)'"; }
say "job $job COMPLETED on pkgtest: $(cat "$out")"

for p in "${pids[@]}"; do kill -TERM "$p"; done
for p in "${pids[@]}"; do
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && fail "pid $p did not stop within 10 s of SIGTERM"
done
pids=()

# ---- 5. purge -------------------------------------------------------------------------
dpkg_r --purge hachi-slurm-compat hachi >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg --purge"; }
left=$(cd "$R" && find . -mindepth 1 \( -path ./var/lib/dpkg -o -path ./etc/passwd -o -path ./etc/group \
  -o -path ./etc/shadow -o -path ./etc/gshadow -o -path ./etc/.pwd.lock -o -name '*-' \) -prune -o ! -type d -print)
[ -z "$left" ] || fail "left in R after purge: $left"
[ ! -e "$R/var/lib/hachi" ] || fail "R/var/lib/hachi survived the purge"
say "purged: nothing left but the user (R's passwd, group, shadow files and their lock)"
say "passed in $((SECONDS - start)) s"
