#!/usr/bin/env bash
# `make demo`: Hachi's main job for now — look at real and preset 8-GPU nodes, check
# them, choose GPUs for jobs of several sizes, then replay a real cluster trace through
# the scheduler with each policy. Later issues add the server and agents.
set -uo pipefail
hachi=${1:-build/hachi}

step() { printf '\n\033[1m==> %s\033[0m\n$ %s\n' "$1" "${*:2}"; "${@:2}"; echo "(exit $?)"; }

step "This machine (NVML, then nvidia-smi; none here means a clear message)" \
  "$hachi" topo show
step "An HGX H100 node: NVSwitch, two NUMA halves" "$hachi" topo show --preset hgx-h100
step "An 8x L40S PCIe box: two sockets, two PCIe switches each" \
  "$hachi" topo show --preset pcie-8x-l40s
step "A real DGX-1 from its nvidia-smi output (hybrid cube-mesh)" \
  "$hachi" topo show --file testdata/nvidia-smi/topo-dgx1-v100-microway.txt
step "A broken paste from a cloud VM: findings name the row and column" \
  "$hachi" topo check --file testdata/nvidia-smi/topo-8x-a100-vm-malformed-ph0-cells.txt
step "A 4-GPU server where 8 are expected" \
  "$hachi" topo check --expect-gpus 8 --file testdata/nvidia-smi/topo-4x-l40s-nics-missalignment106.txt

step "2 GPUs on a DGX-1: an NV2 pair" "$hachi" topo alloc --preset dgx1-v100 --count 2
step "1 GPU on a bridged-pairs box with 0,1,2,3,5 free: the lone GPU 5, pairs stay whole" \
  "$hachi" topo alloc --preset pcie-8x-4090-nv4-pairs --count 1 --free 0,1,2,3,5
step "...where NVIDIA's go-gpuallocator besteffort policy breaks a pair" \
  "$hachi" topo alloc --preset pcie-8x-4090-nv4-pairs --count 1 --free 0,1,2,3,5 --policy besteffort
step "1 GPU on an HGX H100 with GPU 0 busy: stay on NUMA 0, keep the 4-7 half whole" \
  "$hachi" topo alloc --preset hgx-h100 --count 1 --free 1-7
step "4 GPUs on the L40S box: one socket" "$hachi" topo alloc --preset pcie-8x-l40s --count 4
step "A job that holds GPU 4 and grows to 2" \
  "$hachi" topo alloc --preset dgx1-v100 --count 2 --require 4 --json
step "9 GPUs on an 8-GPU node: refused with the reason" \
  "$hachi" topo alloc --preset hgx-h100 --count 9
step "16-GPU HGX-2, 8 GPUs" "$hachi" topo alloc --preset hgx2-16 --count 8 --free 2-15

# The scheduler, through the simulator: the same sched/ code the server will run.
root=$(cd "$(dirname "$0")/.." && pwd)
philly=${HACHI_SHARED_DIR:-$(dirname "$root")/shared}/traces/philly-atc19/philly_jobs_pollux.csv
if [ -f "$philly" ]; then
  for policy in fifo easy hachi; do
    step "The whole Philly trace (82k jobs) on 96 HGX H100 nodes, policy $policy" \
      "$hachi" sim --trace "$philly" --policy "$policy"
  done
else
  for policy in fifo easy hachi; do
    step "2,000 Philly jobs on 96 HGX H100 nodes, policy $policy (no ../shared here)" \
      "$hachi" sim --trace testdata/traces/philly_first2000.csv --policy "$policy"
  done
fi
exit 0
