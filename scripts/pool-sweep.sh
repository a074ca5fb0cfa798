#!/usr/bin/env bash
# Sizes a fixed fleet against burst capacity (docs/pools.md): replays a trace with
# `hachi sim` on F fixed nodes plus 96 - F burst nodes for each F, and prints each
# run's waits, the burst nodes' powered and busy GPU-hours and the cost per 30 days.
#
#   scripts/pool-sweep.sh [BUILD_DIR] [TRACE]
#
# Environment: FIXED="96 80 64 48 32 16" (the fixed counts), RESUME_DELAY=5m,
# SUSPEND_AFTER=30m, RESUME_TIMEOUT=10m, FIXED_PRICE=2.0 and BURST_PRICE=4.0 (per
# GPU-hour), POLICY=hachi, SVG=FILE (also draws wait against cost there).
set -euo pipefail

build=${1:-build}
trace=${2:-$(dirname "$0")/../../shared/traces/philly-atc19/philly_jobs_pollux.csv}
fixed_counts=${FIXED:-96 80 64 48 32 16}
total=96
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-14s %10s %10s %10s %12s %12s %8s %14s\n' fleet "wait mean" "wait p95" \
  resumes "burst GPU-h" "busy GPU-h" "busy %" "cost / 30 d"
rows=()
for f in $fixed_counts; do
  b=$((total - f))
  cfg="$work/pools-$f.toml"
  {
    if ((f > 0)); then
      printf '[[pool]]\nname = "fixed"\nnodes = "n[0001-%04d]"\nprice_per_gpu_hour = %s\n\n' \
        "$f" "${FIXED_PRICE:-2.0}"
    fi
    if ((b > 0)); then
      printf '[[pool]]\nname = "burst"\nnodes = "n[%04d-%04d]"\nkind = "burst"\n' \
        $((f + 1)) "$total"
      printf 'resume_program = "/bin/true"\nsuspend_program = "/bin/true"\n'
      printf 'suspend_after = "%s"\nresume_timeout = "%s"\nprice_per_gpu_hour = %s\n' \
        "${SUSPEND_AFTER:-30m}" "${RESUME_TIMEOUT:-10m}" "${BURST_PRICE:-4.0}"
    fi
  } >"$cfg"
  "$build/hachi" sim --trace "$trace" --cluster "${total}x8:hgx-h100" \
    --policy "${POLICY:-hachi}" --config "$cfg" \
    --resume-delay "${RESUME_DELAY:-5m}" --json 2>/dev/null >"$work/out-$f.json"
  row=$(python3 - "$work/out-$f.json" "$f" "$b" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
f, b = sys.argv[2], sys.argv[3]
burst = [p for p in m.get("pools", []) if p["kind"] == "burst"]
on = sum(p["powered_gpu_hours"] for p in burst)
busy = sum(p["busy_gpu_hours"] for p in burst)
resumes = sum(p["resumes"] for p in burst)
cost = sum(p["cost"] for p in m.get("pools", []))
month = cost * 30 * 86400 / m["span_s"] if m.get("span_s") else 0
print(f"{f}+{b}", round(m["wait_mean_s"]), round(m["wait_p95_s"]), resumes,
      round(on), round(busy), f"{100 * busy / on:.1f}" if on else "-", round(month))
EOF
)
  rows+=("$row")
  read -r fleet mean p95 resumes on busy pct month <<<"$row"
  printf '%-14s %10s %10s %10s %12s %12s %8s %14s\n' "$fleet" "$mean" "$p95" \
    "$resumes" "$on" "$busy" "$pct" "$month"
done

if [[ -n "${SVG:-}" ]]; then
  printf '%s\n' "${rows[@]}" >"$work/rows.txt"
  python3 - "$SVG" "$work/rows.txt" <<'EOF'
# Mean and p95 wait against the cost per 30 days, one point per fleet: a plain SVG.
import sys
rows = [l.split() for l in open(sys.argv[2]) if l.strip()]
pts = [(r[0], float(r[7]), float(r[1]), float(r[2])) for r in rows]
W, H, L, B = 640, 400, 70, 50
xs = [p[1] for p in pts]; ys = [p[3] for p in pts] + [p[2] for p in pts]
x0, x1 = min(xs) * 0.95, max(xs) * 1.05
y1 = max(ys) * 1.1 or 1
X = lambda v: L + (v - x0) / (x1 - x0) * (W - L - 60)
Y = lambda v: H - B - v / y1 * (H - B - 20)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
       'font-family="sans-serif" font-size="12">',
       f'<line x1="{L}" y1="{H-B}" x2="{W-20}" y2="{H-B}" stroke="black"/>',
       f'<line x1="{L}" y1="20" x2="{L}" y2="{H-B}" stroke="black"/>',
       f'<text x="{W/2}" y="{H-10}" text-anchor="middle">cost per 30 days</text>',
       f'<text x="15" y="{H/2}" transform="rotate(-90 15 {H/2})" '
       'text-anchor="middle">wait (s)</text>']
for name, color, idx in (("mean", "#1f77b4", 2), ("p95", "#d62728", 3)):
    s = sorted(pts, key=lambda p: p[1])
    path = " ".join(f"{X(p[1]):.1f},{Y(p[idx]):.1f}" for p in s)
    out.append(f'<polyline points="{path}" fill="none" stroke="{color}"/>')
    for p in s:
        out.append(f'<circle cx="{X(p[1]):.1f}" cy="{Y(p[idx]):.1f}" r="3" fill="{color}"/>')
        if idx == 3:
            out.append(f'<text x="{X(p[1]):.1f}" y="{Y(p[idx]) - 8:.1f}" '
                       f'text-anchor="middle">{p[0]}</text>')
    out.append(f'<text x="{W-90}" y="{30 + 16 * (idx - 2)}" fill="{color}">{name} wait</text>')
for v in (x0, (x0 + x1) / 2, x1):
    out.append(f'<text x="{X(v):.1f}" y="{H-B+16}" text-anchor="middle">{v:,.0f}</text>')
for v in (0, y1 / 2, y1):
    out.append(f'<text x="{L-6}" y="{Y(v)+4:.1f}" text-anchor="end">{v:,.0f}</text>')
out.append("</svg>")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
EOF
  echo "plot: $SVG"
fi
