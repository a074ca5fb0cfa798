#!/usr/bin/env python3
"""Today's binary against a new one at scale, in one run (docs/benchmarks.md).

    bench/scale/compare.py NEW_HACHI [BASELINE_HACHI] [--out DIR]

Runs bench/scale/agents.py for the baseline at 64 and 200 agents and for the new binary at
64, 200 and 1000 (one after the other, never two at once), then prints a Markdown table of
the figures side by side. Without a baseline (or $SCALE_BASELINE) only the new binary's
columns. --out DIR keeps each run's raw key=value output (scale_LABEL.txt) and the table
(scale.md). A run that agents.py refuses (not enough memory) is a column of "refused";
a run that breaks (e.g. the 65th agent of today's binary never registering) shows what
it measured. Exits 1 only when a run failed as a script (agents.py exit 1) or ran past
its bound. Knobs: SCALE_BASE_N=64,200 SCALE_NEW_N=64,200,1000 SCALE_RUN_TIMEOUT=1800 (s),
and agents.py's own (passed through).
"""

import os
import re
import signal
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_TIMEOUT = float(os.environ.get("SCALE_RUN_TIMEOUT", "1800"))

# (row label, how to show it from a run's figures, target)
ROWS = [
    ("agents registered", lambda m: f"{m['registered']} of {m['agents']}", "all"),
    ("every node idle after the first start", lambda m: secs(m, "register_s"), ""),
    ("`hachi --version` median (the floor)", lambda m: ms(m, "lat_version"), ""),
    ("`hachi queue` TCP median / p90", lambda m: ms(m, "lat_queue_tcp"), "< 20 ms"),
    ("`hachi queue` Unix median / p90", lambda m: ms(m, "lat_queue_unix"), "< 20 ms"),
    ("`hachi submit` TCP median / p90", lambda m: ms(m, "lat_submit_tcp"), "< 20 ms"),
    ("`hachi submit` Unix median / p90", lambda m: ms(m, "lat_submit_unix"), "< 20 ms"),
    (f"array of {os.environ.get('ARRAY', '2000')} × `sleep 1`: submit → all done",
     lambda m: array(m), "< 10 s"),
    ("array tasks run exactly once", lambda m: once(m), "all"),
    ("server RSS (idle, agents connected)", lambda m: mb(m, "server_rss_kb"), ""),
    ("server RSS after the array", lambda m: mb(m, "server_rss_kb_after_array"), ""),
    ("server threads", lambda m: m.get("server_threads", "–"), ""),
    ("server open fds", lambda m: m.get("server_fds", "–"), ""),
    ("server CPU, 10 s idle", lambda m: cpu(m), ""),
    ("kill -9 + restart: agents back, jobs running", lambda m: restart(m), "< 15 s"),
    ("jobs lost in the restart", lambda m: lost(m), "0"),
]


def secs(m, key):
    v = m.get(key)
    if v is None:
        return "–"
    return "never" if float(v) < 0 else f"{float(v):.1f} s"


def ms(m, key):
    if f"{key}_ok" not in m:
        return "–"
    bad = int(m[f"{key}_failed"]) + int(m[f"{key}_timeouts"])
    skipped = int(m[f"{key}_skipped"])
    if int(m[f"{key}_ok"]) == 0:
        s = "no answer"
    else:
        s = f"{float(m[f'{key}_p50_ms']):.1f} / {float(m[f'{key}_p90_ms']):.1f} ms"
    if bad or skipped:
        s += f" ({m[f'{key}_timeouts']} timeouts, {m[f'{key}_failed']} failed"
        s += f", {skipped} not tried)" if skipped else ")"
    return s


def array(m):
    st = m.get("array_status")
    if st is None:
        return "–"
    if st == "done":
        return f"{float(m['array_done_s']):.1f} s"
    if st == "ended":
        return (f"{float(m['array_wait_s']):.1f} s, but only {m['array_completed']} COMPLETED "
                f"({m['array_states']})")
    if st == "timeout":
        return f"not done in {float(m['array_wait_s']):.0f} s ({m['array_completed']} COMPLETED)"
    return st.replace("_", " ")


def once(m):
    if m.get("array_status") not in ("done", "ended", "timeout"):
        return "–"
    s = f"{m['array_ran_once']} of {m['array_tasks']}"
    if m["array_ran_more_than_once"] != "0":
        s += f", {m['array_ran_more_than_once']} twice or more"
    if m["array_never_ran"] != "0":
        s += f", {m['array_never_ran']} never"
    return s


def mb(m, key):
    return f"{int(m[key]) / 1024:.1f} MB" if key in m else "–"


def cpu(m):
    return f"{float(m['server_idle_cpu_s']):.2f} s" if "server_idle_cpu_s" in m else "–"


def restart(m):
    st = m.get("restart_status")
    if st is None:
        return "–"
    if st not in ("done", "timeout"):
        return st.replace("_", " ")
    jobs = m["restart_jobs"]
    if m.get("restart_jobs_wanted", jobs) != jobs:
        jobs += f" of {m['restart_jobs_wanted']}"
    if st == "done":
        return f"{float(m['restart_s']):.1f} s ({jobs} jobs running before)"
    if st == "timeout":
        return (f"not in {os.environ.get('RESTART_TIMEOUT', '60')} s "
                f"({m['restart_agents_back']} agents back)")
    return st.replace("_", " ")


def lost(m):
    if m.get("restart_status") not in ("done", "timeout"):
        return "–"
    return f"{m['restart_jobs_lost']} of {m['restart_jobs']}"


def run(hachi, n, label, out_dir):
    """(agents.py's exit code, its figures {key: value}, whether it ran past the bound)."""
    print(f"==> {label}: bench/scale/agents.py {hachi} {n}", file=sys.stderr, flush=True)
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "agents.py"), hachi, str(n)],
                         stdout=subprocess.PIPE, text=True)
    # agents.py bounds each of its steps; this bounds the whole run: SIGTERM, on which
    # agents.py stops what it started and exits.
    fired = []

    def stop():
        fired.append(True)
        p.send_signal(signal.SIGTERM)

    timer = threading.Timer(RUN_TIMEOUT, stop)
    timer.start()
    lines = []
    try:
        for line in p.stdout:  # stderr (progress) passes straight through
            print(line, end="", flush=True)
            lines.append(line)
        rc = p.wait()
    except KeyboardInterrupt:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        raise
    finally:
        timer.cancel()
    if out_dir:
        with open(os.path.join(out_dir, f"scale_{label}.txt"), "w") as f:
            f.writelines(lines)
    figures = dict(re.match(r"([a-z0-9_]+)=(.*)", line.strip()).groups()
                   for line in lines if re.match(r"[a-z0-9_]+=", line))
    return rc, figures, bool(fired)


def main():
    args, out_dir = [], None
    argv = sys.argv[1:]
    while argv:
        a = argv.pop(0)
        if a == "--out" and argv:
            out_dir = argv.pop(0)
        else:
            args.append(a)
    if not 1 <= len(args) <= 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    new = args[0]
    base = args[1] if len(args) > 1 else os.environ.get("SCALE_BASELINE", "")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    plan = []
    if base:
        plan += [(base, int(n), f"baseline_{n}")
                 for n in os.environ.get("SCALE_BASE_N", "64,200").split(",")]
    else:
        print("compare: no baseline binary (argument or $SCALE_BASELINE): new binary only",
              file=sys.stderr)
    plan += [(new, int(n), f"new_{n}")
             for n in os.environ.get("SCALE_NEW_N", "64,200,1000").split(",")]

    columns, status = [], 0
    for hachi, n, label in plan:
        rc, m, timed_out = run(hachi, n, label, out_dir)
        if timed_out:
            print(f"compare: {label} ran past {RUN_TIMEOUT:.0f} s; stopped", file=sys.stderr)
        if rc == 1 or timed_out:
            status = 1
        head = f"{'before' if label.startswith('baseline') else 'after'}, {n} agents"
        columns.append((head, "refused" if rc == 2 else None, m))

    table = ["| | " + " | ".join(h for h, _, _ in columns) + " | target |",
             "|---" * (len(columns) + 2) + "|"]
    for label, show, target in ROWS:
        cells = []
        for _, note, m in columns:
            try:
                cells.append(note or (show(m) if m else "–"))
            except (KeyError, ValueError):
                cells.append("–")
        table.append(f"| {label} | " + " | ".join(cells) + f" | {target} |")
    text = "\n".join(table) + "\n"
    versions = "; ".join(f"{h}: {m.get('binary', '?')}" for h, _, m in columns)
    print("\n" + text + "\n" + versions)
    if out_dir:
        with open(os.path.join(out_dir, "scale.md"), "w") as f:
            f.write(text + "\n" + versions + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
