#!/bin/bash
# The exact command lines Nextflow's and dask-jobqueue's Slurm executors run (read from
# their sources: nextflow-io/nextflow SlurmExecutor.groovy, dask/dask-jobqueue slurm.py
# and core.py), against `hachi dev` through the Slurm names, with the job scripts they
# write (testdata/slurm-scripts/nextflow-task.sh, dask-jobqueue-worker.sh; bodies
# replaced by short commands). Neither tool is installed: Nextflow needs a JVM and its
# own download, dask-jobqueue is not in Debian 12. docs/slurm.md.
# Usage: tool_calls_e2e.sh BUILD_DIR
set -u
build=$(cd "${1:?usage: tool_calls_e2e.sh BUILD_DIR}" && pwd)
hachi="$build/hachi"
src=$(cd "$(dirname "$0")/../.." && pwd)
export USER=${USER:-$(id -un)}
work=$(mktemp -d /tmp/hachi-tools.XXXXXX)
dev_pid=""
cleanup() {
  if [ -n "$dev_pid" ]; then kill "$dev_pid" 2>/dev/null; wait "$dev_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- dev log"; tail -20 "$work/dev.log"; exit 1; }

"$hachi" dev --state-dir "$work/state" --listen 127.0.0.1:0 2>"$work/dev.log" &
dev_pid=$!
export HACHI_SERVER="unix:$work/state/hachi.sock"
mkdir -p "$work/bin"
"$hachi" slurm install-links "$work/bin" >/dev/null || fail "install-links"
export PATH="$work/bin:$PATH"
for _ in $(seq 1 100); do sinfo -h -o %P 2>/dev/null | grep -q . && break; sleep 0.1; done
part=$(sinfo -h -o %P | tr -d '*' | head -1)

# Nextflow: the task's .command.run with its #SBATCH lines, submitted as `sbatch
# .command.run` from the task's work directory; the id read with
# /Submitted batch job (\d+)/; the queue polled with
# `squeue --noheader -o '%i %t' -t all -p QUEUE -u USER`; a task killed with `scancel ID`.
mkdir -p "$work/nf/3f"
sed -e "s#/data/work/3f/a9c2e1#$work/nf/3f#g" -e "s#-p batch#-p $part#" \
    -e 's#^bash .command.sh#sleep 60#' "$src/testdata/slurm-scripts/nextflow-task.sh" \
    >"$work/nf/3f/.command.run"
out=$(cd "$work/nf/3f" && sbatch .command.run 2>&1) || fail "nextflow's sbatch: $out"
nf_id=$(echo "$out" | sed -nE 's/.*Submitted batch job ([0-9]+).*/\1/p')
[ -n "$nf_id" ] || fail "no 'Submitted batch job N' in: $out"
seen=""
for _ in $(seq 1 100); do
  seen=$(squeue --noheader -o '%i %t' -t all -p "$part" -u "$USER" | awk -v id="$nf_id" '$1 == id {print $2}')
  [ "$seen" = R ] && break
  sleep 0.1
done
[ "$seen" = R ] || fail "nextflow's squeue poll: job $nf_id is '$seen', never R"
squeue --noheader -o '%i %t' -t all -p "$part" -u "$USER" | awk 'NF != 2 {bad=1} END {exit bad}' \
  || fail "squeue lines are not '%i %t' pairs"
scancel "$nf_id" || fail "scancel $nf_id"
for _ in $(seq 1 100); do
  seen=$(squeue --noheader -o '%i %t' -t all -p "$part" -u "$USER" | awk -v id="$nf_id" '$1 == id {print $2}')
  [ "$seen" = CA ] && break
  sleep 0.1
done
[ "$seen" = CA ] || fail "after scancel, job $nf_id is '$seen' (expected CA)"

# dask-jobqueue: the worker script written to a temp file and submitted as `sbatch FILE`;
# the id is the first number in sbatch's output; workers stopped with `scancel ID ID`.
ids=()
for i in 1 2; do
  sed -e "s#/home/alice/dask-logs#$work/dask#g" -e "s#-p batch#-p $part#" -e '/^#SBATCH -A/d' \
      -e 's#^/usr/bin/python3 -m distributed.*#sleep 60#' \
      "$src/testdata/slurm-scripts/dask-jobqueue-worker.sh" >"$work/worker$i.sh"
  out=$(sbatch "$work/worker$i.sh" 2>&1) || fail "dask's sbatch: $out"
  id=$(echo "$out" | grep -oE '[0-9]+' | head -1)
  [ -n "$id" ] || fail "no job id in: $out"
  ids+=("$id")
done
for _ in $(seq 1 100); do
  [ "$(squeue -h -t R -n dask-worker -o %i | wc -l)" -eq 2 ] && break
  sleep 0.1
done
[ "$(squeue -h -t R -n dask-worker -o %i | wc -l)" -eq 2 ] || fail "two dask workers should run: $(squeue)"
[ -d "$work/dask" ] || fail "the log directory dask named was not created"
scancel "${ids[@]}" || fail "scancel ${ids[*]}"
for _ in $(seq 1 100); do
  [ "$(squeue -h -n dask-worker -o %i | wc -l)" -eq 0 ] && break
  sleep 0.1
done
[ "$(squeue -h -n dask-worker -o %i | wc -l)" -eq 0 ] || fail "dask workers left after scancel: $(squeue)"
echo "PASS: Nextflow's sbatch/squeue/scancel (job $nf_id), dask-jobqueue's sbatch/scancel (jobs ${ids[*]})"
