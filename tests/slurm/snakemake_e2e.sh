#!/bin/bash
# Snakemake's own --slurm executor (Debian's snakemake 7.21, no profile of ours) against
# `hachi dev` through the Slurm names on PATH (docs/slurm.md):
#  1. a workflow of three chained rules and one failing rule, run with --keep-going: the
#     chain's jobs end COMPLETED, the failing one FAILED, and Snakemake reports it;
#  2. Ctrl-C (SIGINT) to Snakemake while its rule's job runs: Snakemake's scancel ends it,
#     and the job is CANCELLED.
# Usage: snakemake_e2e.sh BUILD_DIR. Exit 77 (ctest: skipped) when snakemake is not
# installed and cannot be (scripts/install-deps.sh installs it).
set -u
build=$(cd "${1:?usage: snakemake_e2e.sh BUILD_DIR}" && pwd)
hachi="$build/hachi"
if ! command -v snakemake >/dev/null 2>&1; then
  echo "SKIP: snakemake is not installed (apt-get install --no-install-recommends snakemake)"
  exit 77
fi
export USER=${USER:-$(id -un)}  # Snakemake's executor reads $USER (sacct -u)
work=$(mktemp -d /tmp/hachi-smk.XXXXXX)
dev_pid=""
cleanup() {
  if [ -n "$dev_pid" ]; then kill "$dev_pid" 2>/dev/null; wait "$dev_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- dev log"; tail -30 "$work/dev.log"; exit 1; }

"$hachi" dev --state-dir "$work/state" --listen 127.0.0.1:0 2>"$work/dev.log" &
dev_pid=$!
export HACHI_SERVER="unix:$work/state/hachi.sock"
mkdir -p "$work/bin"
"$hachi" slurm install-links "$work/bin" || fail "install-links"
export PATH="$work/bin:$PATH"
for _ in $(seq 1 100); do
  sinfo -h -o %P 2>/dev/null | grep -q . && break
  sleep 0.1
done
sinfo -o %P | grep -q '\*' || fail "sinfo -o %P marks no default partition: $(sinfo -o %P)"

# 1. Three chained rules and one that fails.
mkdir -p "$work/wf1"
cat >"$work/wf1/Snakefile" <<'SMK'
rule all:
    input: "out/c.txt", "out/never.txt"

rule a:
    output: "out/a.txt"
    resources: runtime=5, mem_mb=64
    shell: "echo a > {output}"

rule b:
    input: "out/a.txt"
    output: "out/b.txt"
    resources: runtime=5, mem_mb=64
    shell: "cat {input} > {output}; echo b >> {output}"

rule c:
    input: "out/b.txt"
    output: "out/c.txt"
    threads: 2
    resources: runtime=5, mem_mb=64
    shell: "cat {input} > {output}; echo c-$SLURM_JOB_ID >> {output}"

rule fails:
    output: "out/never.txt"
    resources: runtime=5, mem_mb=64
    shell: "echo failing on purpose >&2; exit 3"
SMK
(cd "$work/wf1" && timeout 300 snakemake --slurm --jobs 4 --keep-going \
  --latency-wait 5 >"$work/wf1.log" 2>&1)
rc=$?
[ "$rc" -ne 0 ] || fail "snakemake exited 0 although rule 'fails' failed"
[ "$rc" -ne 124 ] || fail "snakemake ran past 300 s: $(tail -20 "$work/wf1.log")"
grep -q "Error in rule fails" "$work/wf1.log" || fail "no 'Error in rule fails': $(tail -30 "$work/wf1.log")"
head -2 "$work/wf1/out/c.txt" | tr '\n' ' ' | grep -q "^a b $" || fail "out/c.txt: $(cat "$work/wf1/out/c.txt" 2>&1)"
grep -q "^c-[0-9]" "$work/wf1/out/c.txt" || fail "rule c saw no SLURM_JOB_ID"
[ ! -e "$work/wf1/out/never.txt" ] || fail "the failing rule's output exists"
acct=$(sacct -X -P -n -a -S 2000-01-01 --format=JobName,State,ExitCode)
echo "$acct"
for r in a b c; do
  [ "$(echo "$acct" | grep -c "^snakejob_${r}_[0-9]*|COMPLETED|0:0\$")" -eq 1 ] || fail "rule $r should be 1 COMPLETED job: $acct"
done
# The job runs Snakemake's job step, which exits 1 when its rule's command fails.
[ "$(echo "$acct" | grep -c '^snakejob_fails_[0-9]*|FAILED|1:0$')" -eq 1 ] || fail "rule 'fails' should be 1 FAILED job: $acct"

# 2. Ctrl-C while a rule's job runs.
mkdir -p "$work/wf2"
cat >"$work/wf2/Snakefile" <<'SMK'
rule long:
    output: "out/long.txt"
    resources: runtime=5, mem_mb=64
    shell: "sleep 120; echo done > {output}"
SMK
# A background command of a script ignores SIGINT (no job control), and Python then
# keeps ignoring it: restore the default before exec, as a terminal's Ctrl-C finds it.
(cd "$work/wf2" && exec /usr/bin/python3 -c \
  'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
  snakemake --slurm --jobs 1 >"$work/wf2.log" 2>&1) &
smk=$!
job=""
for _ in $(seq 1 300); do
  job=$(squeue -h -t R -o %i 2>/dev/null | head -1)
  [ -n "$job" ] && break
  sleep 0.2
done
[ -n "$job" ] || { kill "$smk"; fail "the long rule's job never ran: $(tail -20 "$work/wf2.log")"; }
kill -INT "$smk"
for _ in $(seq 1 300); do kill -0 "$smk" 2>/dev/null || break; sleep 0.2; done
kill -0 "$smk" 2>/dev/null && { kill -9 "$smk"; fail "snakemake did not stop on SIGINT"; }
state=""
for _ in $(seq 1 100); do
  state=$(sacct -X -P -n -j "$job" --format=State)
  case "$state" in CANCELLED*) break ;; esac
  sleep 0.2
done
case "$state" in
  CANCELLED*) ;;
  *) fail "job $job after Ctrl-C: '$state' (expected CANCELLED): $(tail -20 "$work/wf2.log")" ;;
esac
[ ! -e "$work/wf2/out/long.txt" ] || fail "the cancelled rule's output exists"
echo "PASS: snakemake --slurm: 3 rules COMPLETED, 1 FAILED and reported; Ctrl-C cancelled job $job ($state)"
