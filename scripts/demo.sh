#!/usr/bin/env bash
# `make demo`: Hachi's main job. A small cluster on this machine — `hachi dev` with two
# simulated HGX H100 servers and examples/two-nodes.toml (whole-node `gpu8`, 1-4 GPU
# `gpu-shared`) — runs real processes: one 8-GPU job, four 2-GPU jobs and a few more.
# We watch the queue and the GPU picture while they run, wait for them, print the queue
# wait statistics and stop the cluster. Then a short look at topology and the
# simulator, which runs the very same scheduler on a real trace. No GPU needed.
set -uo pipefail
hachi=$(realpath "${1:-build/hachi}")
root=$(cd "$(dirname "$0")/.." && pwd)

step() { printf '\n\033[1m==> %s\033[0m\n$ %s\n' "$1" "${*:2}"; "${@:2}"; echo "(exit $?)"; }

work=$(mktemp -d /tmp/hachi-demo-XXXXXX)
cleanup() {
  if [ -n "${dev_pid:-}" ] && kill -0 "$dev_pid" 2>/dev/null; then
    kill -TERM "$dev_pid"; wait "$dev_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

printf '\n\033[1m==> Start a cluster: hachi dev, 2 simulated HGX H100 nodes, examples/two-nodes.toml\033[0m\n'
echo "\$ hachi dev --config examples/two-nodes.toml --nodes 2 --preset hgx-h100 --state-dir $work/state --listen 127.0.0.1:0"
"$hachi" dev --config "$root/examples/two-nodes.toml" --nodes 2 --preset hgx-h100 \
  --state-dir "$work/state" --listen 127.0.0.1:0 2> "$work/dev.log" &
dev_pid=$!
for _ in $(seq 50); do
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/dev.log")
  [ -n "$url" ] && break
  sleep 0.1
done
cat "$work/dev.log"
if [ -z "${url:-}" ]; then echo "hachi dev did not start"; exit 1; fi
echo "The dashboard, while the demo runs: $url/ (docs/dashboard.md)"
export HACHI_SERVER=unix:$work/state/hachi.sock  # a local user needs no token there
sleep 0.5  # the agents register

cd "$work"
step "Nodes as sinfo shows them, with the GPU format codes" "$hachi" nodes -o "%n %G %C %P %t"
step "One whole-node training job (#SBATCH directives in the script)" \
  "$hachi" submit "$root/examples/jobs/train.sh" 8
for i in 1 2 3 4; do
  step "A 2-GPU fine-tuning job ($i of 4)" "$hachi" submit "$root/examples/jobs/finetune.sh" 5
done
step "Two more 2-GPU jobs: the shared server is full, and gpu8's server is isolated" \
  "$hachi" submit -p gpu-shared --gpus 2 -t 5:00 -J extra -- sleep 2
"$hachi" submit -p gpu-shared --gpus 2 -t 5:00 -J extra -- sleep 2
step "A second 8-GPU job waits for the first" "$hachi" submit -p gpu8 --gres=gpu:8 -t 10:00 -J train2 -- sleep 2
step "A job that can never run: refused at once, with the reason" \
  "$hachi" submit -p gpu-shared --gpus 9 -- true
sleep 1
step "The queue (squeue's columns; pending jobs say why)" "$hachi" queue
step "Which job holds which GPU" "$hachi" nodes --gpus
pending=$("$hachi" queue -t PD -o "%i" | sed -n 2p | tr -d ' ')
if [ -n "$pending" ]; then
  step "Why job $pending waits, with numbers" "$hachi" show job "$pending"
fi
step "srun-like: run a command, stream its output, exit with its code" \
  "$hachi" run -p gpu-shared --gpus 1 -- sh -c 'echo "hello from GPU $CUDA_VISIBLE_DEVICES on $HACHI_NODENAME"; exit 3'

printf '\n\033[1m==> Waiting for every job to finish\033[0m\n'
for _ in $(seq 120); do
  left=$("$hachi" queue -o "%i" | tail -n +2 | wc -l)
  [ "$left" -eq 0 ] && break
  sleep 1
done
step "Every job, finished ones included" "$hachi" queue -a
step "What the training job printed" sh -c "cat $work/train-*.out"
step "Queue waits per partition and GPU count (a partition past 20 minutes is flagged)" \
  "$hachi" stats

printf '\n\033[1m==> Stopping the cluster\033[0m\n'
kill -TERM "$dev_pid"; wait "$dev_pid"; echo "(exit $?)"; dev_pid=
cd "$root"

# Topology: what the scheduler sees of each server.
step "An HGX H100 node: NVSwitch, two NUMA halves" "$hachi" topo show --preset hgx-h100
step "A real DGX-1 from its nvidia-smi output (hybrid cube-mesh)" \
  "$hachi" topo show --file testdata/nvidia-smi/topo-dgx1-v100-microway.txt
step "A broken paste from a cloud VM: findings name the row and column" \
  "$hachi" topo check --file testdata/nvidia-smi/topo-8x-a100-vm-malformed-ph0-cells.txt
step "1 GPU on a bridged-pairs box with 0,1,2,3,5 free: the lone GPU 5, pairs stay whole" \
  "$hachi" topo alloc --preset pcie-8x-4090-nv4-pairs --count 1 --free 0,1,2,3,5

# The scheduler, through the simulator: the same sched/ code the server runs.
philly=${HACHI_SHARED_DIR:-$(dirname "$root")/shared}/traces/philly-atc19/philly_jobs_pollux.csv
if [ -f "$philly" ]; then
  step "The whole Philly trace (82k jobs) on 96 HGX H100 nodes" "$hachi" sim --trace "$philly"
else
  step "2,000 Philly jobs on 96 HGX H100 nodes (no ../shared here)" \
    "$hachi" sim --trace testdata/traces/philly_first2000.csv
fi
exit 0
