#!/usr/bin/env bash
# The real-GPU check: Hachi against a machine's NVML, nvidia-smi and GPUs. Run it on a
# machine with an NVIDIA GPU (it is what the founders run when a session is lent one):
#   scripts/gpu-check.sh [path/to/hachi] [out-dir]
# It prints every step and its exit status and never stops at a failing one. Into out-dir
# (default ./gpu-check-out) it saves the machine's raw nvidia-smi outputs (to become test
# fixtures) and the log. Nothing here needs a network; the cluster it starts listens on
# 127.0.0.1 only and is stopped at the end.
set -uo pipefail
hachi=$(realpath "${1:-build/hachi}")
out=${2:-gpu-check-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/hachi-gpu-XXXXXX)
exec > >(tee "$out/gpu-check.log") 2>&1

step() { printf '\n==> %s\n$ %s\n' "$1" "${*:2}"; timeout 120 "${@:2}"; echo "(exit $?)"; }

cleanup() {
  if [ -n "${dev_pid:-}" ] && kill -0 "$dev_pid" 2>/dev/null; then
    kill -TERM "$dev_pid"; wait "$dev_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "date: $(date -u +%FT%TZ)  host: $(hostname)  kernel: $(uname -r)"
echo "hachi: $hachi"
ldd "$hachi" | grep -i "not found" && echo "MISSING LIBRARIES"

# The machine as NVIDIA's own tools see it; saved raw for the parser tests.
smi_q="index,uuid,name,memory.total,pci.bus_id"
step "nvidia-smi -L" nvidia-smi -L
nvidia-smi -L > "$out/list-gpus.txt" 2>&1
step "nvidia-smi topo -m" nvidia-smi topo -m
nvidia-smi topo -m > "$out/topo.txt" 2>&1
step "nvidia-smi --query-gpu" nvidia-smi --query-gpu=$smi_q --format=csv
nvidia-smi --query-gpu=$smi_q --format=csv > "$out/query-gpu-csv.txt" 2>&1
nvidia-smi --query-gpu=$smi_q --format=csv,noheader,nounits > "$out/query-gpu-noheader.txt" 2>&1
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1

# Discovery: NVML first (the default), then nvidia-smi alone, then the saved files.
step "hachi topo show (NVML)" "$hachi" topo show
"$hachi" topo show --json > "$out/topo-nvml.json" 2>&1
step "hachi topo check (NVML)" "$hachi" topo check
step "hachi topo check --expect-gpus 8 (this machine has fewer: a missing-GPU error)" \
  "$hachi" topo check --expect-gpus 8
step "hachi topo show through nvidia-smi only (NVML library made unloadable)" \
  env HACHI_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$hachi" topo show
step "hachi topo show -f the saved nvidia-smi topo -m" "$hachi" topo show -f "$out/topo.txt"
step "hachi topo alloc -n 1 (NVML)" "$hachi" topo alloc -n 1

# What the NVML health path (Xid/ECC events, lost GPUs, remapped rows, processes) can
# see on this machine, through NVIDIA's own Python binding when it is installed.
step "NVML events and health readings (nvidia-ml-py)" python3 -c '
import pynvml as n
n.nvmlInit()
print("driver", n.nvmlSystemGetDriverVersion(), "nvml", n.nvmlSystemGetNVMLVersion())
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    def get(f, *a):
        try: return f(h, *a)
        except n.NVMLError as e: return "error: %s" % e
    print("gpu", i, get(n.nvmlDeviceGetName), get(n.nvmlDeviceGetUUID))
    print("  supported event types", get(n.nvmlDeviceGetSupportedEventTypes))
    print("  temperature", get(n.nvmlDeviceGetTemperature, n.NVML_TEMPERATURE_GPU))
    print("  remapped rows", get(n.nvmlDeviceGetRemappedRows))
    print("  retired pages (dbe)", get(n.nvmlDeviceGetRetiredPages, n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR))
    print("  ecc mode", get(n.nvmlDeviceGetEccMode))
    print("  ecc uncorrected volatile", get(n.nvmlDeviceGetTotalEccErrors, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC))
    print("  compute processes", get(n.nvmlDeviceGetComputeRunningProcesses))
    print("  numa node", get(n.nvmlDeviceGetNumaNodeId) if hasattr(n, "nvmlDeviceGetNumaNodeId") else "n/a")
    print("  mig mode", get(n.nvmlDeviceGetMigMode))
    print("  minor number", get(n.nvmlDeviceGetMinorNumber))
    try:
        s = n.nvmlEventSetCreate()
        t = n.nvmlEventTypeXidCriticalError | n.nvmlEventTypeSingleBitEccError | n.nvmlEventTypeDoubleBitEccError
        n.nvmlDeviceRegisterEvents(h, t, s)
        try:
            d = n.nvmlEventSetWait_v2(s, 200)
            print("  event:", d.eventType, d.eventData)
        except n.NVMLError as e:
            print("  registered Xid/ECC events; wait 200 ms:", e)
        n.nvmlEventSetFree(s)
    except n.NVMLError as e:
        print("  event registration:", e)
n.nvmlShutdown()'
step "kernel log Xid lines readable? device nodes, cgroups" bash -c 'dmesg 2>&1 | grep -i -m5 -e xid -e nvrm; echo "dmesg exit ${PIPESTATUS[0]}"; ls -l /dev/nvidia* 2>&1 | head; ls /sys/fs/cgroup | head -30; stat -fc %T /sys/fs/cgroup'

# commtest (docs/nvml.md): what the interconnect delivers, through the CUDA driver, then the
# same two figures from PyTorch in the same run (docs/nvml.md asks ours to be within 10 %).
step "hachi commtest" "$hachi" commtest
step "hachi commtest --json" "$hachi" commtest --json
step "the same from PyTorch: pinned host-to-device and device-to-device, 256 MiB" python3 -c '
import json, subprocess, sys
try:
    import torch
except Exception as e:
    sys.exit("no torch: %s" % e)
n = 256 << 20
def timed(copy, reps=5):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    copy(); torch.cuda.synchronize()
    best = []
    for _ in range(reps):
        s.record(); copy(); e.record(); e.synchronize()
        best.append(s.elapsed_time(e))
    best.sort()
    return n / (best[len(best) // 2] * 1e-3) / 1e9
host = torch.empty(n, dtype=torch.uint8).pin_memory()
dev = torch.empty(n, dtype=torch.uint8, device="cuda:0")
dev2 = torch.empty(n, dtype=torch.uint8, device="cuda:0")
h2d = timed(lambda: dev.copy_(host, non_blocking=True))
d2d = timed(lambda: dev2.copy_(dev, non_blocking=True))
ours = json.loads(subprocess.run([sys.argv[1], "commtest", "--json", "--gpu", "0"],
                                 capture_output=True, text=True).stdout)
g = [x for x in ours["gpus"] if x["index"] == 0][0]
print("GPU 0 h2d: torch %.1f GB/s, hachi %.1f GB/s, ratio %.3f" % (h2d, g["h2d"]["gbps"], g["h2d"]["gbps"] / h2d))
print("GPU 0 d2d: torch %.1f GB/s, hachi %.1f GB/s, ratio %.3f" % (d2d, g["d2d"]["gbps"], g["d2d"]["gbps"] / d2d))
' "$hachi"

# doctor (docs/nvml.md): the runbooks' checks of this node, as the burn-in gate runs them.
step "hachi doctor" "$hachi" doctor
step "hachi doctor --json" "$hachi" doctor --json

# A cluster on this machine: hachi dev finds the real GPUs and makes this host its node,
# which is burned in first (the default check: doctor). Its outcome is shown; when it
# failed, the cluster starts again without burn-in so that the sections below still run.
start_dev() {  # $1: a config file; more: more hachi dev flags
  local config=$1; shift
  "$hachi" dev --state-dir "$work/state" --listen 127.0.0.1:0 --config "$config" "$@" 2> "$work/dev.log" &
  dev_pid=$!
  url=
  for _ in $(seq 100); do
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/dev.log")
    [ -n "$url" ] && break
    sleep 0.1
  done
  cat "$work/dev.log"
  if [ -z "$url" ]; then echo "hachi dev did not start"; exit 1; fi
}
printf '\n==> hachi dev on the real GPUs (burn-in: doctor)\n'
printf '[burn_in]\nchecks = ["doctor"]\ntimeout = "5m"\n' > "$work/burn-in.toml"
printf '[burn_in]\nchecks = []\n' > "$work/no-burn-in.toml"
start_dev "$work/burn-in.toml"
export HACHI_SERVER=unix:$work/state/hachi.sock  # a local user needs no token there
state=
for _ in $(seq 600); do  # the run: a minute at most, bounded here at 60 s
  state=$("$hachi" nodes -o "%t %E" | sed -n 2p)
  case "$state" in *"burn-in: running"*|"") sleep 0.1 ;; *) break ;; esac
done
echo "after burn-in: $state"
grep "burn-in" "$work/dev.log"
case "$state" in
  burn-in*)
    echo "burn-in failed on this machine (above); restarting hachi dev without it"
    kill "$dev_pid"; wait "$dev_pid" 2>/dev/null
    start_dev "$work/no-burn-in.toml" ;;
esac
sleep 1
node=$("$hachi" nodes -o %n | sed -n 2p | tr -d ' ')
step "hachi nodes" "$hachi" nodes
step "hachi nodes -o \"%n %G %C\"" "$hachi" nodes -o "%n %G %C"
step "hachi show node" "$hachi" show node "$node"
step "a job that prints the GPU it was given" \
  "$hachi" run --gpus 1 -t 2:00 -- sh -c 'echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES HACHI_GPUS=$HACHI_GPUS"; nvidia-smi -L; nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader'
step "the same GPU seen from PyTorch inside a job (a bf16 matmul on it)" \
  "$hachi" run --gpus 1 -t 5:00 -- python3 -c '
import os, time, torch
print("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), "devices", torch.cuda.device_count())
print("device 0:", torch.cuda.get_device_name(0))
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ a
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): a @ a
torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 10
print(f"bf16 8192^3 matmul: {2 * 8192**3 / dt / 1e12:.0f} TFLOP/s")'
step "a 2-GPU job on a 1-GPU node is refused with the reason" "$hachi" submit --gpus 2 -- true
# Job steps on the real GPU (docs/steps.md). A step's task sees the job's GPU (and, with
# --gpus-per-task, its own); nvidia-smi run as a step inside a running job (srun
# --jobid --overlap) shows the job's GPU and the job's process on it.
mkdir -p "$work/bin" && "$hachi" slurm install-links "$work/bin" >/dev/null
sjid=$(PATH=$work/bin:$PATH sbatch --parsable --gpus 1 -t 2:00 -o "$work/steps-%j.out" \
  --wrap 'srun -n 1 --gpus-per-task=1 sh -c "echo step sees \$CUDA_VISIBLE_DEVICES; nvidia-smi -L"; python3 -c "import torch, time; a = torch.randn(4096, 4096, device=\"cuda\"); [a @ a for _ in range(10)]; torch.cuda.synchronize(); time.sleep(20)"')
sleep 8
step "srun --jobid --overlap nvidia-smi inside the running job" \
  env PATH="$work/bin:$PATH" srun --jobid="$sjid" --overlap nvidia-smi --query-compute-apps=pid,used_memory --format=csv
step "sacct of the steps job" env PATH="$work/bin:$PATH" sacct -j "$sjid"
sleep 14
step "its output (the step's line and nvidia-smi -L)" sh -c "cat $work/steps-*.out"
printf '\n==> a batch job, its queue line while it runs, then its record\n'
jid=$("$hachi" submit --parsable --gpus 1 -t 1:00 -J gpu-sleep -o "$work/sleep-%j.out" -- sh -c 'echo "on GPU $CUDA_VISIBLE_DEVICES"; sleep 3')
echo "job $jid"
sleep 1
step "hachi queue" "$hachi" queue
step "hachi nodes --gpus" "$hachi" nodes --gpus
sleep 4
step "hachi show job $jid" "$hachi" show job "$jid"
step "its output file" sh -c "cat $work/sleep-*.out"
step "hachi stats" "$hachi" stats
step "hachi drain (the node) then a job waits with the reason" "$hachi" drain "$node" --reason "gpu-check"
"$hachi" submit --gpus 1 -t 1:00 -- true
sleep 1.5
step "hachi queue" "$hachi" queue
step "hachi resume" "$hachi" resume "$node"
sleep 2
step "hachi queue -t all" "$hachi" queue -t all
cp "$work/dev.log" "$out/dev.log"

# GPU shares isolated by MPS (docs/isolation.md "GPU shares"). hachi dev again,
# with a partition that allows shares; the agent runs an MPS control daemon for the
# shared GPU (starting one changes no GPU setting: no compute mode, no MIG). Two halves
# of the GPU, one user, --gpu-mem 20G each: each allocates until CUDA refuses, and should
# stop near its 20 GiB while the other keeps running. Then a bf16 matmul: a whole-GPU job
# alone, one half alone, both halves at once (same run, same matrix).
printf '\n==> GPU shares through MPS\n'
kill "$dev_pid"; wait "$dev_pid" 2>/dev/null
printf '[burn_in]\nchecks = []\n[[partition]]\nname = "gpu"\nnodes = "all"\n[[partition]]\nname = "shared"\nnodes = "all"\nmode = "shared"\nallow_gpu_sharing = true\n' > "$work/shares.toml"
rm -rf "$work/state"
start_dev "$work/shares.toml"
grep "GPU shares" "$work/dev.log"
cat > "$work/fill.py" <<'PY'
import os, sys, time, torch
tag = sys.argv[1]
print(tag, "CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"),
      "pipe", os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
      "limit", os.environ.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), flush=True)
held, chunk = [], 256 << 20
while True:
    try:
        held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError:
        break
    if len(held) * chunk >= (80 << 30):
        break
print(f"{tag}: allocated {len(held) * chunk / 2**30:.2f} GiB before CUDA refused", flush=True)
time.sleep(10)  # the other share is still allocating meanwhile
a = torch.randn(1024, 1024, device="cuda"); (a @ a).sum().item()
print(f"{tag}: still running after the other share filled its part", flush=True)
PY
cat > "$work/mm.py" <<'PY'
import sys, time, torch
tag, secs = sys.argv[1], float(sys.argv[2])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ a
torch.cuda.synchronize(); n, t = 0, time.perf_counter()
while time.perf_counter() - t < secs:
    for _ in range(5): a @ a
    torch.cuda.synchronize(); n += 5
dt = time.perf_counter() - t
print(f"{tag}: bf16 8192^3 matmul {2 * 8192**3 * n / dt / 1e12:.0f} TFLOP/s over {dt:.1f} s", flush=True)
PY
f1=$("$hachi" submit --parsable -p shared --gpu-share 0.5 --gpu-mem 20G -t 3:00 -o "$work/fill-%j.out" -- python3 "$work/fill.py" share-a)
f2=$("$hachi" submit --parsable -p shared --gpu-share 0.5 --gpu-mem 20G -t 3:00 -o "$work/fill-%j.out" -- python3 "$work/fill.py" share-b)
sleep 5
step "hachi show node (MPS)" "$hachi" show node "$node"
step "nvidia-smi while the shares fill their parts" nvidia-smi
step "hachi show job $f1 (GPU memory peak against the promise)" "$hachi" show job "$f1"
for _ in $(seq 90); do
  [ -n "$("$hachi" queue -o %i | sed -n 2p)" ] || break; sleep 1
done
step "the shares' output" sh -c "cat $work/fill-*.out"
step "their records" "$hachi" queue -t all
step "the MPS control log" sh -c "cat $work/state/spool/*/mps/gpu*/log/control.log"
"$hachi" submit --parsable -p gpu --gpus 1 -t 2:00 -o "$work/mm-whole.out" -- python3 "$work/mm.py" whole-gpu-alone 10 >/dev/null
for _ in $(seq 60); do [ -n "$("$hachi" queue -o %i | sed -n 2p)" ] || break; sleep 1; done
"$hachi" submit --parsable -p shared --gpu-share 0.5 -t 2:00 -o "$work/mm-half.out" -- python3 "$work/mm.py" half-alone 10 >/dev/null
for _ in $(seq 60); do [ -n "$("$hachi" queue -o %i | sed -n 2p)" ] || break; sleep 1; done
"$hachi" submit --parsable -p shared --gpu-share 0.5 -t 2:00 -o "$work/mm-a.out" -- python3 "$work/mm.py" half-a-together 10 >/dev/null
"$hachi" submit --parsable -p shared --gpu-share 0.5 -t 2:00 -o "$work/mm-b.out" -- python3 "$work/mm.py" half-b-together 10 >/dev/null
for _ in $(seq 60); do [ -n "$("$hachi" queue -o %i | sed -n 2p)" ] || break; sleep 1; done
step "bf16 matmul: whole GPU alone, a half alone, both halves at once" sh -c "cat $work/mm-*.out"
step "their records" "$hachi" queue -t all
cp "$work/dev.log" "$out/dev-shares.log"

# What a job does with its GPU, through the real NVML path (docs/efficiency.md).
# A PyTorch job alternates 10 s of bf16 matmuls with 10 s of sleep, three times; the
# agent samples it every 2 s; `hachi eff` gives its utilisation (mean near 50 %, p95 near
# 100 %), memory peak, power and SM clock, and `show job` the summary.
printf '\n==> Job usage: busy and idle phases (hachi eff)\n'
kill "$dev_pid"; wait "$dev_pid" 2>/dev/null
rm -rf "$work/state"
start_dev "$work/shares.toml" --usage-interval 2
cat > "$work/phases.py" <<'PY'
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for phase in range(3):
    t = time.perf_counter()
    while time.perf_counter() - t < 10:
        for _ in range(5): a @ a
        torch.cuda.synchronize()
    print(f"phase {phase}: busy 10 s, now idle 10 s", flush=True)
    time.sleep(10)
PY
e1=$("$hachi" submit --parsable -p gpu --gpus 1 -t 3:00 -o "$work/phases-%j.out" -- python3 "$work/phases.py")
sleep 30
step "hachi eff $e1 (running)" "$hachi" eff "$e1"
for _ in $(seq 60); do [ -n "$("$hachi" queue -o %i | sed -n 2p)" ] || break; sleep 1; done
step "hachi eff $e1 (ended)" "$hachi" eff "$e1"
step "hachi show job $e1" "$hachi" show job "$e1"
step "its series (GET /jobs/ID/usage)" sh -c "'$hachi' eff '$e1' --json | python3 -c 'import json,sys; g=json.load(sys.stdin)[\"runs\"][-1][\"gpus\"][0]; print(g[\"step\"], g[\"series\"])'"
cp "$work/dev.log" "$out/dev-usage.log"
echo "gpu-check: done"
