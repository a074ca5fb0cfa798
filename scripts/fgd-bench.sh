#!/usr/bin/env bash
# FGD placement benchmark (docs/benchmarks.md): our four policies on the 17 openb pod lists,
# seeds 42-51, beside the published Random/BestFit/FGD numbers (`hachi` is the live
# scheduler of src/sched/; the other three the reference policies); prints a Markdown
# table of the allocation ratio (%) at 130 % arrived demand (the published curve's
# column 130), averaged over the seeds, to stdout only. About 680 runs: ~3 min on 2
# cores, ~1 min on 8.
# Usage: scripts/fgd-bench.sh [path/to/hachi] [jobs]
set -euo pipefail
hachi=${1:-build/hachi}
jobs=${2:-$(nproc)}
shared=${HACHI_SHARED_DIR:-$(cd "$(dirname "$0")/.." && pwd)/../shared}
expected=$shared/traces/fgd-atc23-expected-results/analysis_allo_discrete.csv.gz
[ -x "$hachi" ] || { echo "fgd-bench: no $hachi (build it first)" >&2; exit 1; }
[ -f "$expected" ] || { echo "fgd-bench: no $expected" >&2; exit 1; }
lists="default cpu0 cpu037 cpu050 cpu072 cpu100 cpu200 cpu235 cpu250 cpu300 gpushare20
gpushare40 gpushare60 gpushare80 gpushare100 gpuspec05 gpuspec10 gpuspec20 gpuspec25 gpuspec33
multigpu20 multigpu30 multigpu40 multigpu50"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
# Only the lists the published results cover (17 of the 24 files).
published=$(zcat "$expected" | tail -n +2 | cut -d, -f1 | sort -u | sed 's/openb_pod_list_//')
for l in $lists; do
  grep -qx "$l" <<<"$published" || continue
  for p in random bestfit fgd hachi; do
    for s in $(seq 42 51); do echo "$l $p $s"; done
  done
done | xargs -P "$jobs" -L 1 sh -c \
  '"$0" sim --placement openb --pods "$1" --policy "$2" --seed "$3" --json >"'"$out"'/$1.$2.$3.json"' "$hachi"
python3 - "$out" "$expected" "$published" <<'PY'
import csv, glob, gzip, json, os, sys
out, expected, lists = sys.argv[1], sys.argv[2], sys.argv[3].split()
pub = {}
with gzip.open(expected, "rt") as f:
    for row in csv.DictReader(f):
        key = (row["workload"].replace("openb_pod_list_", ""), row["sc_policy"])
        pub.setdefault(key, []).append(float(row["130"]))
ours, wall = {}, []
for path in glob.glob(os.path.join(out, "*.json")):
    d = json.load(open(path))
    ours.setdefault((d["pods"], d["policy"]), []).append(d["alloc_ratio_at_130"] * 100)
    wall.append(d["wall_s"])
mean = lambda v: sum(v) / len(v)
order = ["default"] + sorted(l for l in lists if l != "default")
print("| pod list | random | bestfit | fgd | hachi | pub Random | pub BestFit | pub FGD | hachi − pub FGD |")
print("|---|---|---|---|---|---|---|---|---|")
for l in order:
    o = [mean(ours[(l, p)]) for p in ("random", "bestfit", "fgd", "hachi")]
    p = [mean(pub[(l, k)]) for k in ("01-Random", "05-BestFit", "06-FGD")]
    print(f"| {l} | " + " | ".join(f"{v:.2f}" for v in o + p) + f" | {o[3] - p[2]:+.2f} |")
print(f"\n{len(wall)} runs, wall per run: mean {mean(wall):.2f} s, max {max(wall):.2f} s")
PY
echo "total $(( $(date +%s) - start )) s with $jobs parallel runs"
