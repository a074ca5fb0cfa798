#!/usr/bin/env python3
"""What a process start costs: `hachi --version`, the job waiter and a held `hachi submit`
against an empty C++ program (`int main(){}`, built here with the flags `hachi` links
with) and /bin/true, measured in the same run (docs/benchmarks.md, "Process start").

  bench/start/start_cost.py BUILD_DIR        # part of `make bench`, not of `make test`

Instructions are counted, not timed (the machine is shared): `perf stat -e instructions:u`
where the CPU's counters are there, else valgrind's callgrind (deterministic). Page
faults from `perf stat -e page-faults`. Each command has a budget, a multiple of the
empty program's figure; the script exits 1 when one is over it, 2 when it cannot measure.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# name, argv after the binary, budget (× the empty program) for instructions and faults.
# --version and submit pay ld.so relocating the PIE (26 k pointers, 70 % of them the
# statically linked OpenSSL's) and the C++ static initialisers: 7.7× and 9.9× the empty
# program's instructions, 5.1× and 5.7× its faults (2026-12-05). The budgets are those
# figures plus a margin: the binary before (87.6× and 20.5×: every command's tree built,
# the presets parsed, a std::regex compiled per client) fails them.
BUDGETS = [
    ("hachi --version", ["{hachi}", "--version"], 9.0, 6.5),
    ("hachi-job-waiter", ["{waiter}", "__job-waiter"], 1.5, 1.6),
    ("hachi submit -H", ["{hachi}", "submit", "-H", "--gres=gpu:1", "-t", "1", "-o",
                         "/dev/null", "--wrap", "true"], 14.0, 7.0),
]
RUNS = int(os.environ.get("START_RUNS", "20"))


def perf_works(event):
    if not shutil.which("perf"):
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", event, "/bin/true"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "<not supported>" not in r.stderr and \
        "<not counted>" not in r.stderr


def perf_stat(event, argv, env, runs):
    r = subprocess.run(["perf", "stat", "-x,", "-r", str(runs), "-e", event] + argv,
                       capture_output=True, text=True, env=env)
    for line in r.stderr.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2].startswith(event.split(":")[0]):
            return float(f[0])
    raise RuntimeError("perf stat gave no %s for %s: %s" % (event, argv, r.stderr))


def callgrind(argv, env):
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
                       + argv, capture_output=True, text=True, env=env)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if not m:
        raise RuntimeError("callgrind gave no count for %s: %s" % (argv, r.stderr[-500:]))
    return float(m.group(1))


def start_dev(hachi, tmp):
    log = open(os.path.join(tmp, "dev.log"), "w")
    p = subprocess.Popen([hachi, "dev", "--nodes", "1", "--preset", "hgx-h100",
                          "--state-dir", os.path.join(tmp, "state"),
                          "--listen", "127.0.0.1:0"], stdout=log, stderr=log, cwd=tmp)
    sock = os.path.join(tmp, "state", "hachi.sock")
    for _ in range(300):
        if os.path.exists(sock):
            break
        if p.poll() is not None:
            break
        time.sleep(0.1)
    if not os.path.exists(sock):
        p.kill()
        raise RuntimeError("hachi dev did not start: " + open(log.name).read())
    return p, "unix:" + sock


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = os.path.abspath(sys.argv[1])
    hachi = os.path.join(build, "hachi")
    waiter = os.path.join(build, "hachi-job-waiter")
    for b in (hachi, waiter):
        if not os.access(b, os.X_OK):
            print("start_cost: %s is not built" % b, file=sys.stderr)
            return 2
    if perf_works("instructions:u"):
        count, how = (lambda a, e: perf_stat("instructions:u", a, e, 5)), "perf instructions:u"
    elif shutil.which("valgrind"):
        count, how = callgrind, "callgrind Ir"
    else:
        print("start_cost: neither perf's instruction counter nor valgrind", file=sys.stderr)
        return 2
    if not perf_works("page-faults"):
        print("start_cost: perf stat -e page-faults does not work here", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="hachi-start-cost.")
    dev = None
    try:
        empty = os.path.join(tmp, "empty")
        src = empty + ".cc"
        open(src, "w").write("int main() {}\n")
        subprocess.run([os.environ.get("CXX", "c++"), "-O3", "-static-libstdc++",
                        "-static-libgcc", src, "-o", empty], check=True)
        dev, server = start_dev(hachi, tmp)
        # A fixed, small environment: a submit carries the caller's.
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "HACHI_SERVER": server}
        rows = []
        for name, argv in [("/bin/true", ["/bin/true"]), ("empty C++ program", [empty])]:
            rows.append((name, count(argv, env), perf_stat("page-faults", argv, env, RUNS),
                         None, None))
        base_i, base_f = rows[1][1], rows[1][2]
        failed = []
        for name, argv, bud_i, bud_f in BUDGETS:
            argv = [a.format(hachi=hachi, waiter=waiter) for a in argv]
            i = count(argv, env)
            f = perf_stat("page-faults", argv, env, RUNS)
            rows.append((name, i, f, bud_i, bud_f))
            if i > bud_i * base_i or f > bud_f * base_f:
                failed.append(name)
        print("process start, %s; page faults: perf stat -r %d; load %s" %
              (how, RUNS, open("/proc/loadavg").read().split()[0]))
        print("| command | instructions | × empty (budget) | page faults | × empty (budget) |")
        print("|---|---|---|---|---|")
        for name, i, f, bi, bf in rows:
            bud = lambda x, b: "%.2f" % x + (" (%.1f)" % b if b else "")
            print("| %s | %.0f | %s | %.0f | %s |" % (name, i, bud(i / base_i, bi), f,
                                                    bud(f / base_f, bf)))
        if failed:
            print("start_cost: over budget: " + ", ".join(failed), file=sys.stderr)
            return 1
        return 0
    finally:
        if dev is not None:
            dev.terminate()
            try:
                dev.wait(timeout=20)
            except subprocess.TimeoutExpired:
                dev.kill()
                dev.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
