#!/usr/bin/env bash
# The control plane on separate "hosts": `hachi server` in one network namespace, N real
# `hachi agent` processes (simulated hgx-h100 GPUs) in another, each agent in its own
# mount namespace with a private /tmp, on addresses that exist only inside the two
# namespaces (10.77.0.1 and 10.77.0.2 over a veth pair). Submits JOBS 1-GPU jobs and
# GANGS 2-node whole-node jobs, waits for all to end, and checks: every job COMPLETED,
# each ran exactly once (one line per run in its output file), no agent lost.
# Root only. Cleans up what it made (namespaces, processes by pid, its directory).
#
# With STEP_NODES=K (docs/steps.md), then one sbatch job on K nodes whose script runs
# `srun -n 8K` (eight tasks per node, each printing its rank and node): the step's time,
# and that every rank came back once through the relay.
#
# With BURN_IN=1 (docs/burn-in.md), every node is burned in as it registers: a site script
# (2 s, as a short check) that fails on the last node ("link down"); the others pass.
# Reports how long the fleet took to pass, and checks that the failing node stays in
# burn-in with the script's reason and that no job ever ran on it.
#
# With POOL=1 (docs/pools.md), the upper half of the nodes and N more that never register
# are a burst pool (programs /bin/true, preset hgx-h100): the power service runs every
# cycle over 2N pool nodes, and the jobs still all run once on the registered nodes.
#
#   scripts/scale-netns.sh BUILD_DIR            # N=60 JOBS=600 GANGS=20 STEP_NODES=0 BURN_IN=0
set -euo pipefail
build=${1:?usage: scripts/scale-netns.sh BUILD_DIR}
N=${N:-60}
JOBS=${JOBS:-600}
GANGS=${GANGS:-20}
STEP_NODES=${STEP_NODES:-0}
BURN_IN=${BURN_IN:-0}
POOL=${POOL:-0}
TIMEOUT=${TIMEOUT:-600}
[ "$(id -u)" -eq 0 ] || { echo "scale-netns: needs root (ip netns)" >&2; exit 2; }
tag=hs$$
srv=${tag}s
agt=${tag}a
dir=$(mktemp -d /var/tmp/hachi-scale.XXXXXX)  # not /tmp: the agents' /tmp is private
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.2
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  ip netns del "$srv" 2>/dev/null || true
  ip netns del "$agt" 2>/dev/null || true
  [ -n "${KEEP:-}" ] && cp "$dir/server.log" "$KEEP" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
# A host's tmpfs /tmp hides the machine's, and with it a checkout cloned there: every
# host runs this copy (binding the build back in would put the checkout in its /tmp).
cp "$build/hachi" "$dir/hachi"
hachi=$dir/hachi
# The jobs' working directory (submit and sbatch take the caller's): one every host
# sees, which the caller's may not be when it is under /tmp.
cd "$dir"

ip netns add "$srv"
ip netns add "$agt"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "$srv"
ip link set "${tag}y" netns "$agt"
ip -n "$srv" addr add 10.77.0.1/30 dev "${tag}x"
ip -n "$agt" addr add 10.77.0.2/30 dev "${tag}y"
for ns in "$srv" "$agt"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${tag}$([ "$ns" = "$srv" ] && echo x || echo y)" up
done

mkdir -p "$dir/state" "$dir/out"
chmod 1777 "$dir/out"
bad=$(printf 'n%04d' "$N")  # BURN_IN=1: the node whose check fails
: >"$dir/cluster.toml"
if [ "$BURN_IN" -eq 1 ]; then
  printf '#!/bin/sh\nsleep 2\n[ "$HACHI_NODE" = %s ] || exit 0\necho "GPU 3 NVLink 2 down" >&2\nexit 2\n' \
    "$bad" >"$dir/check.sh"
  chmod 755 "$dir/check.sh"
  printf '[burn_in]\nchecks = ["%s"]\nsimulated = true\n' "$dir/check.sh" >"$dir/cluster.toml"
fi
if [ "$POOL" -eq 1 ]; then
  printf '[[pool]]\nname = "burst"\nnodes = ["n[%04d-%04d]", "x[0001-%04d]"]\n' \
    $((N / 2 + 1)) "$N" "$N" >>"$dir/cluster.toml"
  printf 'kind = "burst"\npreset = "hgx-h100"\nresume_program = "/bin/true"\n' \
    >>"$dir/cluster.toml"
  printf 'suspend_program = "/bin/true"\nsuspend_after = "1h"\n' >>"$dir/cluster.toml"
fi
ip netns exec "$srv" "$hachi" server --state-dir "$dir/state" --listen 10.77.0.1:8686 \
  --config "$dir/cluster.toml" >"$dir/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$dir/state/hachi.sock" ] && [ -f "$dir/state/cluster-secret" ] && break; sleep 0.1; done
cp "$dir/state/cluster-secret" "$dir/agent-secret"

rss_of() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# CPU seconds (user + system) a process has used so far.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }
t0=$(date +%s.%N)
for i in $(seq 1 "$N"); do
  name=$(printf 'n%04d' "$i")
  ip netns exec "$agt" unshare -m sh -c "mount -t tmpfs tmpfs /tmp && cd / && exec '$hachi' agent \
    --server http://10.77.0.1:8686 --name $name --address 10.77.0.2 --preset hgx-h100 \
    --spool-dir /tmp/spool --cgroup none --cluster-secret-file '$dir/agent-secret'" \
    >"$dir/agent-$name.log" 2>&1 &
  pids+=($!)
done
cli() { ip netns exec "$srv" env HACHI_SERVER="unix:$dir/state/hachi.sock" "$hachi" "$@"; }
up=0
want_up=$N
[ "$BURN_IN" -eq 1 ] && want_up=$((N - 1))
for _ in $(seq 1200); do
  up=$(cli nodes 2>/dev/null | grep -cE ' (idle|mix|alloc) ' || true)  # not idle~ (powered off)
  [ "$up" -ge "$want_up" ] && break
  sleep 0.1
done
t_reg=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.2f", a - b}')
echo "registered: $up of $N agents in service in ${t_reg}s"
burn_ok=0
if [ "$BURN_IN" -eq 1 ]; then
  bad_row() { cli nodes -o '%n|%T|%E' 2>/dev/null | grep "^$bad|" | tr -s ' '; }
  for _ in $(seq 100); do
    bad_row | grep -q 'burn-in failed' && break
    sleep 0.1
  done
  echo "burn-in: $up of $N passed the 2 s check in ${t_reg}s; $(bad_row)"
  bad_row | grep -q "^$bad|burn-in|burn-in failed: .*exit code 2: GPU 3 NVLink 2 down" || burn_ok=1
fi

t1=$(date +%s.%N)
cpu1=$(cpu_of "${pids[0]}")
for i in $(seq 1 "$JOBS"); do
  cli submit --gres=gpu:1 -t 5 -o "$dir/out/%j.out" --wrap 'echo run $HACHI_JOB_ID $HACHI_NODENAME' >/dev/null
done
for i in $(seq 1 "$GANGS"); do
  cli submit -N 2 --exclusive --gres=gpu:8 -t 5 -o "$dir/out/%j.out" \
    --wrap 'echo run $HACHI_JOB_ID $HACHI_NODENAME rank=$NODE_RANK master=$MASTER_ADDR' >/dev/null
done
t_sub=$(awk -v a="$(date +%s.%N)" -v b="$t1" 'BEGIN {printf "%.2f", a - b}')
total=$((JOBS + GANGS))
done_n=0
deadline=$(( $(date +%s) + TIMEOUT ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  left=$(cli queue -t PD,R 2>/dev/null | tail -n +2 | wc -l)
  [ "$left" -eq 0 ] && break
  sleep 0.5
done
t_all=$(awk -v a="$(date +%s.%N)" -v b="$t1" 'BEGIN {printf "%.2f", a - b}')
cpu_jobs=$(awk -v a="$(cpu_of "${pids[0]}")" -v b="$cpu1" 'BEGIN {printf "%.2f", a - b}')
# Idle, with every agent polling (and, with POOL=1, burst nodes idle and resuming).
cpu2=$(cpu_of "${pids[0]}")
sleep 3
cpu_idle=$(awk -v a="$(cpu_of "${pids[0]}")" -v b="$cpu2" 'BEGIN {printf "%.2f", a - b}')
completed=$(cli queue -a -t CD 2>/dev/null | tail -n +2 | wc -l)
notok=$(cli queue -a 2>/dev/null | tail -n +2 | awk '$5 != "CD"' | wc -l)
twice=0
for f in "$dir"/out/*.out; do
  id=$(basename "$f" .out)
  runs=$(grep -c "^run $id " "$f" || true)
  want=1
  grep -q "rank=" "$f" && want=2  # a gang: one line from each of its two nodes' ranks
  [ "$runs" -ne "$want" ] && twice=$((twice + 1))
done
files=$(ls "$dir"/out/*.out 2>/dev/null | wc -l)
gang_meet=$(grep -h "rank=" "$dir"/out/*.out 2>/dev/null | grep -vc "master=10.77.0.2" || true)
down=$(cli nodes -o '%T' 2>/dev/null | tail -n +2 | grep -c '^ *down' || true)
echo "submitted $total jobs in ${t_sub}s; all ended ${t_all}s after the first submit"
echo "server CPU from the first submit until all ended: ${cpu_jobs}s; over 3 s idle: ${cpu_idle}s"
echo "completed $completed of $total; other states $notok; output files $files; wrong run counts $twice"
echo "gang ranks with MASTER_ADDR other than the agents' address: $gang_meet; nodes down: $down"
echo "server RSS $(rss_of "${pids[0]}") kB; one agent RSS $(rss_of "${pids[1]}") kB"
step_ok=0
if [ "$STEP_NODES" -gt 0 ]; then
  tasks=$((STEP_NODES * 8))
  mkdir -p "$dir/bin"
  "$hachi" slurm install-links "$dir/bin" >/dev/null
  {
    echo '#!/bin/sh'
    echo 't0=$(date +%s%N)'
    echo "srun -n $tasks sh -c 'echo rank \$SLURM_PROCID on \$SLURMD_NODENAME'"
    echo 'echo "step took $(( ($(date +%s%N) - t0) / 1000000 )) ms"'
  } >"$dir/step.sh"
  chmod 755 "$dir/step.sh"
  sid=$(ip netns exec "$srv" env HACHI_SERVER="unix:$dir/state/hachi.sock" \
    PATH="$dir/bin:$PATH" sbatch --parsable -N "$STEP_NODES" --exclusive --gres=gpu:8 -t 5 \
    -o "$dir/step.out" "$dir/step.sh")
  for _ in $(seq 1200); do
    grep -q "step took" "$dir/step.out" 2>/dev/null && break
    sleep 0.1
  done
  ranks=$(grep -c '^rank ' "$dir/step.out" 2>/dev/null || true)
  distinct=$(grep '^rank ' "$dir/step.out" 2>/dev/null | awk '{print $2}' | sort -u | wc -l)
  nodes_seen=$(grep '^rank ' "$dir/step.out" 2>/dev/null | awk '{print $4}' | sort -u | wc -l)
  echo "step of $tasks tasks on $STEP_NODES nodes (job $sid): $(grep 'step took' "$dir/step.out"); ranks back $ranks, distinct $distinct, nodes $nodes_seen"
  { [ "$ranks" -eq "$tasks" ] && [ "$distinct" -eq "$tasks" ] &&
    [ "$nodes_seen" -eq "$STEP_NODES" ]; } || step_ok=1
fi
if [ "$BURN_IN" -eq 1 ]; then
  on_bad=$( (grep -l " $bad\( \|$\)" "$dir"/out/*.out 2>/dev/null || true) | wc -l)
  echo "jobs that ran on $bad (in burn-in): $on_bad"
  [ "$on_bad" -eq 0 ] || burn_ok=1
  bad_row | grep -q "^$bad|burn-in|" || burn_ok=1
fi
[ "$burn_ok" -eq 0 ] || exit 1
[ "$step_ok" -eq 0 ] || exit 1
[ "$completed" -eq "$total" ] && [ "$twice" -eq 0 ] && [ "$down" -eq 0 ] && [ "$gang_meet" -eq 0 ]
