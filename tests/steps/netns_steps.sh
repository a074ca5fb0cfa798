#!/usr/bin/env bash
# Job steps across hosts that share nothing but the network (docs/steps.md): `hachi server` in
# one network namespace, two `hachi agent`s each in a namespace of its own and a mount
# namespace with a private /tmp, on addresses that exist only inside them (10.78.0.0/24
# on a bridge in the server's namespace). Checks:
#   1. an sbatch script on h1 whose `srun -n 2` puts a rank on each host: rank 1 connects
#      to rank 0 at MASTER_ADDR:MASTER_PORT over that network, and the output of both
#      reaches the script's srun through the server (srun on h1 talks to the server over
#      TCP with the job's credential; nothing is in a shared /tmp);
#   2. `hachi run` from the server's host ("a login node") runs a command on both hosts
#      and gets both outputs back;
#   3. h2's link goes down for a minute in the middle of a 2-node step: h2's agent stops
#      its tasks when its lease expires, the server ends the job NODE_FAIL and its step
#      with it, the waiting srun returns, and when the link comes back nothing runs again.
# Root only (exit 77: skipped otherwise). Cleans up what it made: namespaces, processes by
# pid, its directory.
#
#   tests/steps/netns_steps.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tests/steps/netns_steps.sh BUILD_DIR}
[ "$(id -u)" -eq 0 ] || { echo "netns_steps: needs root (ip netns); skipped" >&2; exit 77; }
command -v ip >/dev/null || { echo "netns_steps: no ip(8); skipped" >&2; exit 77; }
command -v python3 >/dev/null || { echo "netns_steps: no python3; skipped" >&2; exit 77; }
tag=st$$
srv=${tag}s
dir=$(mktemp -d /var/tmp/hachi-steps.XXXXXX)  # not /tmp: the agents' /tmp is private
chmod 755 "$dir"
pids=()
agent_pid=()
fail=0
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.2
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for ns in "$srv" "${tag}1" "${tag}2"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
# A host's tmpfs /tmp hides the machine's, and with it a checkout cloned there: every
# host runs this copy (binding the build back in would put the checkout in its /tmp).
cp "$build/hachi" "$dir/hachi"
hachi=$dir/hachi
# The jobs' working directory (sbatch and hachi run take the caller's): one every host
# sees, which the test's own may not be when it is under /tmp.
cd "$dir"
check() {  # check NAME CONDITION-STATUS DETAIL
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1: $3"; fail=1; fi
}

ip netns add "$srv"
ip -n "$srv" link add br0 type bridge
ip -n "$srv" addr add 10.78.0.1/24 dev br0
ip -n "$srv" link set br0 up
ip -n "$srv" link set lo up
for i in 1 2; do
  ns=${tag}$i
  ip netns add "$ns"
  ip link add "${tag}h$i" type veth peer name "${tag}b$i"
  ip link set "${tag}h$i" netns "$ns"
  ip link set "${tag}b$i" netns "$srv"
  ip -n "$srv" link set "${tag}b$i" master br0
  ip -n "$srv" link set "${tag}b$i" up
  ip -n "$ns" addr add "10.78.0.1$i/24" dev "${tag}h$i"
  ip -n "$ns" link set "${tag}h$i" up
  ip -n "$ns" link set lo up
done

mkdir -p "$dir/state" "$dir/out"
chmod 1777 "$dir/out"
# A 20 s lease (agent timeout 20 s): the link-down case ends within the minute.
ip netns exec "$srv" "$hachi" server --state-dir "$dir/state" --listen 10.78.0.1:8686 \
  --agent-timeout 20 --lease 20 >"$dir/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  [ -S "$dir/state/hachi.sock" ] && [ -f "$dir/state/cluster-secret" ] && break
  sleep 0.1
done
cp "$dir/state/cluster-secret" "$dir/agent-secret"
for i in 1 2; do
  ip netns exec "${tag}$i" unshare -m sh -c "mount -t tmpfs tmpfs /tmp && cd / && exec '$hachi' \
    agent --server http://10.78.0.1:8686 --name h$i --address 10.78.0.1$i \
    --preset hgx-h100 --spool-dir /tmp/spool --cgroup none \
    --cluster-secret-file '$dir/agent-secret'" >"$dir/agent-h$i.log" 2>&1 &
  pids+=($!)
  agent_pid[$i]=$!
done
cli() { ip netns exec "$srv" env HACHI_SERVER="unix:$dir/state/hachi.sock" "$hachi" "$@"; }
# Slurm's names on PATH, for this script and the jobs (which inherit it).
mkdir -p "$dir/bin"
"$hachi" slurm install-links "$dir/bin" >/dev/null
slurm() {  # slurm CMD ARGS
  ip netns exec "$srv" env HACHI_SERVER="unix:$dir/state/hachi.sock" \
    PATH="$dir/bin:$PATH" "$@"
}
# From here on every check says what failed and the script goes on (no set -e).
set +e
wait_idle() {  # both nodes up and idle within 30 s
  local up=0
  for _ in $(seq 300); do
    up=$(cli nodes 2>/dev/null | grep -c ' idle' || true)
    [ "$up" -ge 2 ] && return 0
    sleep 0.1
  done
  return 1
}
wait_idle
check "both agents registered" $? "$(cli nodes 2>&1)"

wait_state() {  # wait_state JOB STATE SECONDS
  for _ in $(seq $(($3 * 10))); do
    slurm sacct -X -P -n -o State -j "$1" 2>/dev/null | grep -q "$2" && return 0
    sleep 0.1
  done
  return 1
}

# 1. Two ranks on two hosts meet at MASTER_ADDR:MASTER_PORT.
cat >"$dir/meet.py" <<'EOF'
import os, socket, time
rank = int(os.environ["SLURM_PROCID"])
host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
node = os.environ["SLURMD_NODENAME"]
if rank == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(1)
    s.settimeout(30)
    c, addr = s.accept()
    print("rank 0 on %s got '%s' from %s" % (node, c.recv(100).decode(), addr[0]), flush=True)
else:
    for _ in range(300):
        try:
            c = socket.create_connection((host, port), timeout=2)
            break
        except OSError:
            time.sleep(0.1)
    c.sendall(("hello from rank 1 on " + node).encode())
    print("rank 1 on %s sent to %s:%d" % (node, host, port), flush=True)
EOF
cat >"$dir/job.sh" <<EOF
#!/bin/sh
#SBATCH -N 2 --gpus-per-node=8 -o $dir/out/meet-%j.out
srun -n 2 -l python3 $dir/meet.py
echo "batch on \$SLURMD_NODENAME tmp \$(ls /tmp | tr '\n' ' ')"
EOF
chmod 755 "$dir/job.sh" "$dir/meet.py"
id=$(slurm sbatch --parsable "$dir/job.sh")
wait_state "$id" COMPLETED 60
check "2-node step COMPLETED" $? "$(slurm sacct -j "$id" 2>&1)"
out=$(cat "$dir/out/meet-$id.out" 2>/dev/null || true)
echo "$out" | grep -q "^0: rank 0 on h1 got 'hello from rank 1 on h2' from 10.78.0.12$"
check "rank 0 on h1 heard rank 1 on h2 over the namespaces' network" $? "$out"
echo "$out" | grep -q "^1: rank 1 on h2 sent to 10.78.0.11:"
check "rank 1's output (h2) reached srun on h1" $? "$out"
[ "$(echo "$out" | grep -c '^batch on ')" -eq 1 ] && echo "$out" | grep -q '^batch on h1 '
check "the script ran once, on h1" $? "$out"
echo "$out" | grep -q "^batch on h1 tmp spool $"
check "h1's /tmp is its own (only its spool)" $? "$out"
steps=$(slurm sacct -P -n -o JobID,State,NNodes -j "$id")
echo "$steps" | grep -q "^$id.0|COMPLETED|2$"
check "sacct shows the step $id.0 on 2 nodes" $? "$steps"

# 2. hachi run from the login host: the command on both hosts, both outputs back.
run_out=$(cli run -N 2 --gpus-per-node=1 -- sh -c 'echo "on $SLURMD_NODENAME rank $SLURM_PROCID"' 2>&1)
echo "$run_out" | grep -q "^on h1 rank 0$" && echo "$run_out" | grep -q "^on h2 rank 1$"
check "hachi run from the server's host gets both hosts' output" $? "$run_out"

# 3. h2 cut off for a minute in the middle of a 2-node step.
cat >"$dir/long.sh" <<EOF
#!/bin/sh
#SBATCH -N 2 --gpus-per-node=8 -o $dir/out/long-%j.out
srun -n 2 -l sh -c 'echo start \$SLURMD_NODENAME; sleep 600'
echo "srun returned \$?"
EOF
chmod 755 "$dir/long.sh"
lid=$(slurm sbatch --parsable "$dir/long.sh")
for _ in $(seq 300); do
  grep -q "start h2" "$dir/out/long-$lid.out" 2>/dev/null && break
  sleep 0.1
done
grep -q "start h2" "$dir/out/long-$lid.out" 2>/dev/null
check "the long step started on both hosts" $? "$(cat "$dir/out/long-$lid.out" 2>&1)"
ip -n "${tag}2" link set "${tag}h2" down
t_cut=$(date +%s)
wait_state "$lid" NODE_FAIL 90
check "the job ends NODE_FAIL while h2 is cut off" $? "$(slurm sacct -j "$lid" 2>&1)"
# The job's batch shell on h1 was stopped with the job; its srun with it.
steps=$(slurm sacct -P -n -o JobID,State -j "$lid")
echo "$steps" | grep -q "^$lid.0|NODE_FAIL$"
check "its step ended with it" $? "$steps"
# h2's agent stopped its task itself when its lease expired (no server to tell it).
for _ in $(seq 300); do
  grep -q "lease expired" "$dir/agent-h2.log" && break
  sleep 0.1
done
grep -q "lease expired" "$dir/agent-h2.log"
check "h2's agent stopped its jobs at its lease" $? "$(tail -5 "$dir/agent-h2.log")"
sleep $((60 - ($(date +%s) - t_cut) > 0 ? 60 - ($(date +%s) - t_cut) : 0))
ip -n "${tag}2" link set "${tag}h2" up
wait_idle
check "h2 back, both idle" $? "$(cli nodes 2>&1)"
sleep 3
starts=$(grep -c "start h2" "$dir/out/long-$lid.out" || true)
check "nothing ran twice (one start on h2)" "$([ "$starts" -eq 1 ]; echo $?)" \
  "$(cat "$dir/out/long-$lid.out")"
left=$(ip netns exec "${tag}2" sh -c "ps -eo args | grep -c '[s]leep 600'" || true)
check "no task left on h2" "$([ "$left" -eq 0 ]; echo $?)" "$left left"
slurm sacct -X -P -n -o State -j "$lid" | grep -q "^NODE_FAIL$"
check "the job stays NODE_FAIL" $? "$(slurm sacct -j "$lid" 2>&1)"

if [ $fail -ne 0 ]; then
  echo "--- server.log"; tail -30 "$dir/server.log"
  for i in 1 2; do echo "--- agent-h$i.log"; tail -20 "$dir/agent-h$i.log"; done
  exit 1
fi
echo "netns steps: all passed"
