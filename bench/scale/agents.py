#!/usr/bin/env python3
"""The scale benchmark (docs/benchmarks.md "Scale: N real agents on one server").

    bench/scale/agents.py HACHI_BINARY N

On 127.0.0.1 only, in a fresh temporary directory that it deletes at the end: one
`hachi server` and N real `hachi agent` processes (simulated hgx-h100 GPUs, each with its
own --name nNNNN and spool directory), then
  1. the time until every node is `idle` (bounded; stops early when registration stalls);
  2. the server's RSS, threads, open descriptors and CPU over 10 s with no API traffic,
     and the agents' CPU and wake-ups meanwhile (per idle agent);
  3. `hachi --version` (the floor: process start), `hachi queue` and `hachi submit` (a
     trivial 1-GPU job), LAT_CALLS times each, over TCP and over the Unix socket, every call
     bounded by CALL_TIMEOUT s: median and p90 in ms, failures and timeouts;
  4. one array of ARRAY one-GPU `sleep 1` jobs: from the submit returning to all COMPLETED,
     and that each task ran exactly once (a line per run in a counter file), with the
     agents' CPU per job (their own; their waiters' and jobs'; the job's command alone);
  5. `kill -9` of the server with a long job (`sleep 600`) running on every node, a restart
     on the same state and port, and the time until every agent is connected to the new
     server, every node is up and every job is RUNNING with its original process alive.
With STORE=postgresql://... (e.g. what scripts/pg-scratch.sh prints), two servers share
that database (docs/ha.md): A, then B as its standby, the agents and TCP clients given
both; step 5 is then a failover: `kill -9` of the leader A, no restart, and the times
until `hachi queue` (both servers listed) answers and until every agent is connected to
B, every node is up and every job RUNNING with its original process alive.
Prints one `key=value` line per figure on stdout (progress on stderr) and a summary.
Exits 0 whether or not a target is met; 2 when it refuses to start (not enough memory),
1 on a script error. Stops only the processes it started, by pid.

Knobs (environment): LAT_CALLS=50 CALL_TIMEOUT=10 ARRAY=2000 ARRAY_TIMEOUT=120
RESTART_JOBS=min(N,1000) RESTART_TIMEOUT=60 STALL_S=20 BATCH=100 PRESET=hgx-h100 STORE=
LEADER_LEASE= (with STORE: hachi server --leader-lease) KEEP= (1: keep the directory,
its logs included).
"""

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

LAT_CALLS = int(os.environ.get("LAT_CALLS", "50"))
CALL_TIMEOUT = float(os.environ.get("CALL_TIMEOUT", "10"))
ARRAY = int(os.environ.get("ARRAY", "2000"))
ARRAY_TIMEOUT = float(os.environ.get("ARRAY_TIMEOUT", "120"))
RESTART_TIMEOUT = float(os.environ.get("RESTART_TIMEOUT", "60"))
STALL_S = float(os.environ.get("STALL_S", "20"))
BATCH = int(os.environ.get("BATCH", "100"))
PRESET = os.environ.get("PRESET", "hgx-h100")
STORE = os.environ.get("STORE", "")  # a PostgreSQL URI: two servers, and a failover
LEADER_LEASE = os.environ.get("LEADER_LEASE", "")
GPUS_PER_NODE = 8  # hgx-h100
# A series of calls stops after 3 failures in a row or 6 in all: a server that no longer
# answers costs a few timeouts, not LAT_CALLS of them.
MAX_FAILS_IN_ROW, MAX_FAILS = 3, 6
# Memory per process, MiB: an agent ~8 MB RSS of which ~2.6 MB its own (PSS), the issue's
# "about 7 MB"; a running job's `__job-waiter` + `sh`/`sleep` ~1.6 MB PSS.
AGENT_MB, JOB_MB, SPARE_MB = 7, 2, 1024
# `hachi nodes` %t of a node that is up (src/cli/slurm_format.cc NodeStateText).
UP_STATES = ("idle", "mix", "mixed", "alloc", "allocated")

T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def emit(key, value):
    if isinstance(value, float):
        value = f"{value:.3f}" if value < 100 else f"{value:.1f}"
    print(f"{key}={value}", flush=True)


def percentile(values, p):
    """Nearest rank; the median of an even count is the mean of the middle two."""
    if not values:
        return None
    v = sorted(values)
    if p == 50:
        n = len(v)
        return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    rank = max(1, -(-p * len(v) // 100))  # ceil(p/100 * n)
    return v[int(rank) - 1]


def mem_available_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def proc_cpu_s(pid):
    """utime + stime of a process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_cpu_split_s(pid):
    """(own utime + stime, reaped children's cutime + cstime), seconds; (0, 0) when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    tck = os.sysconf("SC_CLK_TCK")
    return (int(v[11]) + int(v[12])) / tck, (int(v[13]) + int(v[14])) / tck


def proc_wakeups(pid):
    """Context switches of every thread of a process (each one a wake-up)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if "ctxt_switches:" in line:
                        total += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return total


def proc_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def proc_fd_limit(pid):
    try:
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max open files"):
                    return int(line.split()[3])
    except (OSError, ValueError):
        pass
    return -1


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        pass
    return inodes


def tcp_established():
    """(local port, remote port, inode) of every ESTABLISHED IPv4 TCP socket."""
    rows = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            p = line.split()
            if p[3] != "01":
                continue
            rows.append((int(p[1].split(":")[1], 16), int(p[2].split(":")[1], 16), p[9]))
    return rows


def agents_connected(server_pid, port, agent_pids):
    """The agents holding a TCP connection that server_pid has accepted (is in its fd
    table: a connection still in the listen backlog does not count)."""
    rows = tcp_established()
    srv = socket_inodes(server_pid)
    peer_ports = {rp for lp, rp, ino in rows if lp == port and ino in srv}
    agent_side = {ino for lp, rp, ino in rows if rp == port and lp in peer_ports}
    return {pid for pid in agent_pids if socket_inodes(pid) & agent_side}


class Bench:
    def __init__(self, hachi, n):
        self.hachi = hachi
        self.n = n
        self.dir = tempfile.mkdtemp(prefix="hachi-scale.")
        self.state = os.path.join(self.dir, "state")
        self.sock = os.path.join(self.state, "hachi.sock")
        self.port = free_port()
        self.server = None
        # With STORE: server B, A's standby, on a port and state directory of its own;
        # both read the cluster secret from one file.
        self.port_a = self.port
        self.port_b = free_port() if STORE else None
        self.state_b = os.path.join(self.dir, "state-b")
        self.server_b = None
        self.secret = os.path.join(self.dir, "cluster-secret")
        self.agents = {}  # pid -> Popen
        self.token = None
        self.summary = []
        self.last_err = ""  # the last CLI call's stderr
        self.registered = 0
        self.master_port_flag = None  # does this binary take --master-port-count?
        os.makedirs(os.path.join(self.dir, "pids"))
        os.makedirs(os.path.join(self.dir, "logs"))
        if STORE:
            with open(os.open(self.secret, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(os.urandom(24).hex() + "\n")

    def servers(self):
        """What agents and TCP clients are given: one URL, or both servers'."""
        urls = [f"http://127.0.0.1:{self.port_a}"]
        if STORE:
            urls.append(f"http://127.0.0.1:{self.port_b}")
        return ",".join(urls)

    def server_argv(self, state, port):
        argv = [self.hachi, "server", "--state-dir", state, "--listen", f"127.0.0.1:{port}"]
        if STORE:
            argv += ["--store", STORE, "--advertise", f"http://127.0.0.1:{port}",
                     "--cluster-secret-file", self.secret]
            if LEADER_LEASE:
                argv += ["--leader-lease", LEADER_LEASE]
        return argv

    # ---- processes
    def start_server(self):
        logf = open(os.path.join(self.dir, "logs", "server.log"), "ab")
        argv = self.server_argv(self.state, self.port)
        # Every simulated node here has the address 127.0.0.1, so they all draw their
        # MASTER_PORTs from one range (a real node has a range of its own): widen it to
        # fit one job per GPU of the whole simulated cluster. Older binaries have no
        # such flag (nor the limit).
        if self.master_port_flag is None:
            help_text = subprocess.run([self.hachi, "server", "--help"],
                                       capture_output=True, text=True).stdout
            self.master_port_flag = "--master-port-count" in help_text
        if self.master_port_flag:
            argv += ["--master-port-base", "20000", "--master-port-count", "40000"]
        self.server = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            cwd=self.dir, start_new_session=True)
        logf.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(self.sock) and self.cli(["queue"], "unix", timeout=2)[0] == 0:
                return True
            if self.server.poll() is not None:
                break
            time.sleep(0.05)
        return False

    def start_standby(self):
        """Server B (STORE only): up when its socket exists (a standby answers 503)."""
        logf = open(os.path.join(self.dir, "logs", "server-b.log"), "ab")
        argv = self.server_argv(self.state_b, self.port_b)
        if self.master_port_flag:
            argv += ["--master-port-base", "20000", "--master-port-count", "40000"]
        self.server_b = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            cwd=self.dir, start_new_session=True)
        logf.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(os.path.join(self.state_b, "hachi.sock")):
                return True
            if self.server_b.poll() is not None:
                break
            time.sleep(0.05)
        return False

    def start_agents(self):
        secret = self.secret if STORE else os.path.join(self.state, "cluster-secret")
        for i in range(1, self.n + 1):
            name = f"n{i:04d}"
            spool = os.path.join(self.dir, "spool", name)
            os.makedirs(spool)
            logf = open(os.path.join(self.dir, "logs", f"agent-{name}.log"), "wb")
            p = subprocess.Popen(
                [self.hachi, "agent", "--server", self.servers(),
                 "--name", name, "--preset", PRESET, "--spool-dir", spool,
                 "--cgroup", "none", "--cluster-secret-file", secret],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                cwd=self.dir, start_new_session=True)
            logf.close()
            self.agents[p.pid] = p
            if i % BATCH == 0:
                time.sleep(0.05)  # let the server and the started agents run a little

    def env(self, transport):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.dir}
        if transport == "tcp":
            env["HACHI_SERVER"] = self.servers()
            if self.token:
                env["HACHI_TOKEN"] = self.token
        else:
            env["HACHI_SERVER"] = f"unix:{self.sock}"
        return env

    def cli(self, args, transport="unix", timeout=CALL_TIMEOUT):
        """(rc, stdout, ms); rc is None when the call ran past timeout (and was killed)."""
        t = time.perf_counter()
        try:
            r = subprocess.run([self.hachi] + args, env=self.env(transport), cwd=self.dir,
                               stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=timeout)
            self.last_err = r.stderr.decode(errors="replace").strip()
            return r.returncode, r.stdout.decode(errors="replace"), \
                (time.perf_counter() - t) * 1000
        except subprocess.TimeoutExpired:
            self.last_err = f"timed out after {timeout:g} s"
            return None, "", (time.perf_counter() - t) * 1000

    def probe(self):
        """Does the Unix-socket API answer? Steps after a dead API are skipped, not waited on."""
        return self.cli(["queue", "-o", "%i"], "unix")[0] == 0

    def node_states(self, timeout=CALL_TIMEOUT):
        rc, out, _ = self.cli(["nodes", "-o", "%n %t"], "unix", timeout=timeout)
        if rc != 0:
            return None
        states = {}
        for line in out.splitlines()[1:]:
            p = line.split()
            if len(p) >= 2:
                states[p[0]] = p[1]
        return states

    def job_ids(self, states="PD,R", timeout=CALL_TIMEOUT):
        rc, out, _ = self.cli(["queue", "-t", states, "--json"], "unix", timeout=timeout)
        try:
            return [j["id"] for j in json.loads(out)["jobs"]] if rc == 0 else None
        except (ValueError, KeyError):
            return None

    # ---- 1. registration
    def register(self):
        deadline_s = 120 + self.n * 0.1
        t = time.monotonic()
        self.start_agents()
        emit("spawn_s", time.monotonic() - t)
        log(f"{self.n} agents started; waiting for every node idle (at most {deadline_s:.0f} s)")
        idle, last, last_change, polls_failed = 0, -1, time.monotonic(), 0
        while time.monotonic() - t < deadline_s:
            states = self.node_states()
            if states is None:
                polls_failed += 1
            else:
                idle = sum(1 for s in states.values() if s == "idle")
            if idle != last:
                last, last_change = idle, time.monotonic()
            if idle >= self.n:
                break
            if time.monotonic() - last_change > STALL_S:
                log(f"registration stalled at {idle} of {self.n} for {STALL_S:.0f} s")
                break
            time.sleep(0.5)
        took = time.monotonic() - t
        self.registered = idle
        dead = sum(1 for p in self.agents.values() if p.poll() is not None)
        emit("agents", self.n)
        emit("registered", idle)
        emit("register_s", took if idle >= self.n else -1)
        emit("register_wait_s", took)
        emit("register_polls_failed", polls_failed)
        emit("agents_exited", dead)
        self.summary.append(
            f"registration: {idle} of {self.n} nodes idle "
            + (f"in {took:.1f} s" if idle >= self.n else f"(gave up after {took:.1f} s)")
            + (f"; {dead} agents exited" if dead else ""))

    # ---- 2. server resources
    def resources(self, suffix=""):
        pid = self.server.pid
        st = proc_status(pid)
        rss_kb = int(st.get("VmRSS", "0 kB").split()[0])
        fds, limit = proc_fds(pid), proc_fd_limit(pid)
        emit(f"server_rss_kb{suffix}", rss_kb)
        emit(f"server_hwm_kb{suffix}", int(st.get("VmHWM", "0 kB").split()[0]))
        emit(f"server_threads{suffix}", int(st.get("Threads", "0")))
        emit(f"server_fds{suffix}", fds)
        if not suffix:
            emit("server_fd_limit", limit)
            rss = [int(proc_status(p).get("VmRSS", "0 kB").split()[0])
                   for p in list(self.agents)[:50]]
            emit("agent_rss_kb", sum(rss) // max(1, len(rss)))
            agents = list(self.agents)
            a0 = sum(proc_cpu_split_s(p)[0] for p in agents)
            w0 = sum(proc_wakeups(p) for p in agents)
            c0, t = proc_cpu_s(pid), time.monotonic()
            time.sleep(10)  # no API calls meanwhile: only the agents' own traffic
            cpu = proc_cpu_s(pid) - c0
            wall = time.monotonic() - t
            a_cpu = sum(proc_cpu_split_s(p)[0] for p in agents) - a0
            wakeups = sum(proc_wakeups(p) for p in agents) - w0
            emit("server_idle_cpu_s", cpu)
            emit("server_idle_cpu_pct", 100 * cpu / wall)
            # What idle agents cost the machine: all of them, CPU-s per second, and one of
            # them, its CPU ms per second and its threads' wake-ups per second.
            emit("agents_idle_cpu_s_per_s", a_cpu / wall)
            emit("agent_idle_cpu_ms_per_s", 1000 * a_cpu / wall / max(1, len(agents)))
            emit("agent_idle_wakeups_per_s", wakeups / wall / max(1, len(agents)))
            emit("server_conns_agents", len(agents_connected(pid, self.port, self.agents)))
            self.summary.append(
                f"server idle with the agents: RSS {rss_kb / 1024:.1f} MB, "
                f"{st.get('Threads')} threads, {fds} fds (limit {limit}), "
                f"{cpu:.2f} CPU s in 10 s")

    # ---- 3. latency
    def series(self, key, args, transport):
        ok, fails, timeouts, skipped, in_row, first_error = [], 0, 0, 0, 0, ""
        for i in range(LAT_CALLS):
            if in_row >= MAX_FAILS_IN_ROW or fails + timeouts >= MAX_FAILS:
                skipped = LAT_CALLS - i
                break
            rc, _, ms = self.cli(args, transport)
            if rc == 0:
                ok.append(ms)
                in_row = 0
            else:
                in_row += 1
                first_error = first_error or " ".join(self.last_err.split())[:200]
                if rc is None:
                    timeouts += 1
                else:
                    fails += 1
        p50, p90 = percentile(ok, 50), percentile(ok, 90)
        emit(f"{key}_p50_ms", p50 if p50 is not None else -1)
        emit(f"{key}_p90_ms", p90 if p90 is not None else -1)
        emit(f"{key}_ok", len(ok))
        emit(f"{key}_failed", fails)
        emit(f"{key}_timeouts", timeouts)
        emit(f"{key}_skipped", skipped)
        if first_error:
            emit(f"{key}_first_error", first_error)
        line = f"{key}: " + (f"median {p50:.1f} ms, p90 {p90:.1f} ms" if ok else "no answer")
        if fails or timeouts or skipped:
            line += f" ({fails} failed, {timeouts} timed out, {skipped} not tried)"
        self.summary.append(line)
        return p50

    def latency(self):
        rc, out, _ = self.cli(["token", "create", "root", "--admin"], "unix")
        self.token = out.strip() if rc == 0 else None
        if not self.token:
            log("no token from `hachi token create`: submits over TCP will be refused")
        log(f"latency: {LAT_CALLS} calls each, timeout {CALL_TIMEOUT:.0f} s per call")
        submit = ["submit", "--gres=gpu:1", "-t", "1", "-o", "/dev/null", "--wrap", "true"]
        self.series("lat_version", ["--version"], "unix")
        for tr in ("tcp", "unix"):
            self.series(f"lat_queue_{tr}", ["queue"], tr)
        for tr in ("tcp", "unix"):
            self.series(f"lat_submit_{tr}", submit, tr)

    # ---- 4. the array
    def wait_queue_empty(self, limit_s):
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            rc, out, _ = self.cli(["queue", "-t", "PD,R", "-o", "%i"], "unix")
            if rc == 0 and len(out.splitlines()) <= 1:
                return True
            time.sleep(0.25)
        return False

    def array(self):
        if not self.probe():
            emit("array_status", "skipped_api_down")
            self.summary.append("array: skipped, the API does not answer")
            return
        if not self.wait_queue_empty(60):
            log("jobs of the latency step still queued after 60 s; the array goes on")
        counter = os.path.join(self.dir, "array.runs")
        script = f'echo "$HACHI_ARRAY_TASK_ID $HACHI_JOB_ID" >> {counter}; sleep 1'
        log(f"array of {ARRAY} one-GPU `sleep 1` jobs on {self.registered * GPUS_PER_NODE} GPUs")
        rc, out, ms = self.cli(["submit", "--parsable", f"--array=1-{ARRAY}", "--gres=gpu:1",
                                "-t", "5", "-o", "/dev/null", "--wrap", script], "unix",
                               timeout=60)
        emit("array_submit_ms", ms)
        if rc != 0:
            emit("array_submit_error", " ".join(self.last_err.split())[:200])
            emit("array_status", "submit_failed")
            self.summary.append("array: the submit failed")
            return
        array_id = int(out.strip().split(";")[0].split("_")[0])
        agents = list(self.agents)
        cpu0 = [proc_cpu_split_s(p) for p in agents]
        t = time.monotonic()
        done = self.wait_queue_empty(ARRAY_TIMEOUT)
        took = time.monotonic() - t
        cpu1 = [proc_cpu_split_s(p) for p in agents]
        own = sum(b[0] - a[0] for a, b in zip(cpu0, cpu1))
        children = sum(b[1] - a[1] for a, b in zip(cpu0, cpu1))
        rc, out, _ = self.cli(["queue", "-a", "--json"], "unix", timeout=60)
        try:
            tasks = [j for j in json.loads(out)["jobs"]
                     if j["spec"]["array_job_id"] == array_id] if rc == 0 else []
        except (ValueError, KeyError):
            tasks = []
        completed = sum(1 for j in tasks if j["state"] == "COMPLETED")
        requeues = sum(j.get("requeues", 0) for j in tasks)
        runs = {}
        if os.path.exists(counter):
            with open(counter) as f:
                for line in f:
                    task = line.split()[0] if line.split() else "?"
                    runs[task] = runs.get(task, 0) + 1
        once = sum(1 for i in range(1, ARRAY + 1) if runs.get(str(i)) == 1)
        twice = sum(1 for c in runs.values() if c > 1)
        missing = sum(1 for i in range(1, ARRAY + 1) if str(i) not in runs)
        states = {}
        for j in tasks:
            states[j["state"]] = states.get(j["state"], 0) + 1
        all_done = done and completed == ARRAY
        # "ended": nothing pending or running, but not every task COMPLETED.
        emit("array_status", "done" if all_done else "ended" if done else "timeout")
        emit("array_done_s", took if all_done else -1)
        emit("array_wait_s", took)
        emit("array_tasks", len(tasks))
        emit("array_completed", completed)
        emit("array_ran_once", once)
        emit("array_ran_more_than_once", twice)
        emit("array_never_ran", missing)
        emit("array_requeues", requeues)
        emit("array_states", ",".join(f"{k}:{v}" for k, v in sorted(states.items())))
        # CPU per job on the agents: their own, and their reaped children's (each job's
        # waiter, with the job under it); the job's own command run here alone is the
        # part of the latter that is not the waiter's.
        ran = max(1, sum(runs.values()))
        emit("agent_cpu_ms_per_job", 1000 * own / ran)
        emit("agent_children_cpu_ms_per_job", 1000 * children / ran)
        emit("job_command_cpu_ms", self.job_command_cpu_ms(script.replace("sleep 1", "sleep 0")))
        self.summary.append(
            f"array of {ARRAY}: " + (f"all ended {took:.1f} s after the submit returned"
                                     if done else f"not done after {took:.0f} s")
            + f" ({', '.join(f'{v} {k}' for k, v in sorted(states.items()))})"
            + f"; {once} ran exactly once, {twice} more than once, {missing} never")

    def job_command_cpu_ms(self, script, runs=50):
        """CPU ms of `sh -c SCRIPT` alone (as the array's job runs it), the mean of `runs`."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "HACHI_ARRAY_TASK_ID": "0", "HACHI_JOB_ID": "0"}
        script = script.replace(os.path.join(self.dir, "array.runs"), "/dev/null")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(runs):
            subprocess.run(["/bin/sh", "-c", script], env=env, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return 1000 * ((after.ru_utime - before.ru_utime)
                       + (after.ru_stime - before.ru_stime)) / runs

    # ---- 5. kill -9 and restart
    def pid_files(self):
        d = os.path.join(self.dir, "pids")
        out = {}
        for name in os.listdir(d):
            try:
                with open(os.path.join(d, name)) as f:
                    out[int(name)] = int(f.read().strip())
            except (OSError, ValueError):
                pass  # being written
        return out

    def restart(self):
        # With STORE, a failover: the leader killed, its standby takes over.
        what = "failover" if STORE else "restart"
        if not self.probe():
            emit(f"{what}_status", "skipped_api_down")
            self.summary.append("restart: skipped, the API does not answer")
            return
        want = min(self.registered, int(os.environ.get("RESTART_JOBS", "1000")))
        if want == 0:
            emit(f"{what}_status", "skipped_no_nodes")
            return
        pids_dir = os.path.join(self.dir, "pids")
        # --exclusive: one job per node, so every node has one running.
        script = f"echo $$ > {pids_dir}/$HACHI_JOB_ID; exec sleep 600"
        rc, out, _ = self.cli(["submit", "--parsable", f"--array=1-{want}", "--exclusive",
                               "--gres=gpu:1", "-t", "15", "-o", "/dev/null", "--wrap", script],
                              "unix", timeout=60)
        if rc != 0:
            emit(f"{what}_status", "submit_failed")
            return
        log(f"restart: {want} `sleep 600` jobs, one per node; waiting for all to run")
        deadline = time.monotonic() + 60 + want * 0.05
        running = []
        while time.monotonic() < deadline:
            running = self.job_ids("R") or []
            if len(running) >= want and len(self.pid_files()) >= want:
                break
            time.sleep(0.5)
        jobs = self.pid_files()
        emit(f"{what}_jobs_wanted", want)
        emit(f"{what}_jobs", len(jobs))
        if len(jobs) < want:
            log(f"only {len(jobs)} of {want} jobs started; the restart goes on with those")
        agents = [p for p, proc in self.agents.items() if proc.poll() is None]
        before = len(agents_connected(self.server.pid, self.port, agents))
        log(f"kill -9 of the server ({before} agents connected, {len(jobs)} jobs running)")
        t = time.monotonic()
        self.server.kill()
        self.server.wait()
        answered = None
        if STORE:
            # Nothing restarts: B takes over. The Unix socket to ask is B's from now.
            self.server, self.server_b = self.server_b, None
            self.port = self.port_b
            self.sock = os.path.join(self.state_b, "hachi.sock")
        elif not self.start_server():
            emit(f"{what}_status", "server_did_not_start")
            return
        else:
            emit(f"{what}_server_up_s", time.monotonic() - t)
        back, met, last = set(), None, {}
        deadline = t + RESTART_TIMEOUT
        while time.monotonic() < deadline:
            if answered is None and self.cli(["queue", "-o", "%i"], "tcp", timeout=5)[0] == 0:
                answered = time.monotonic() - t
                emit(f"{what}_queue_s", answered)
            back |= agents_connected(self.server.pid, self.port,
                                     [p for p in agents if p not in back])
            states = self.node_states(timeout=5)
            ids = self.job_ids("R", timeout=5)
            up = sum(1 for s in (states or {}).values() if s in UP_STATES)
            run = len(set(ids or []) & set(jobs))
            live = sum(1 for pid in jobs.values() if alive(pid))
            last = {"back": len(back), "up": up, "run": run, "live": live}
            if len(back) >= len(agents) and up >= self.registered and run >= len(jobs) \
                    and live >= len(jobs):
                met = time.monotonic() - t
                break
            time.sleep(0.25)
        emit(f"{what}_status", "done" if met is not None else "timeout")
        emit(f"{what}_s", met if met is not None else -1)
        emit(f"{what}_agents_back", last.get("back", 0))
        emit(f"{what}_nodes_up", last.get("up", 0))
        # A run the server gives up only when an agent reports in: look again a little later.
        time.sleep(5)
        ids = set(self.job_ids("R") or [])
        lost = sum(1 for j, pid in jobs.items() if j not in ids or not alive(pid))
        emit(f"{what}_jobs_running", len(ids & set(jobs)))
        emit(f"{what}_jobs_alive", sum(1 for pid in jobs.values() if alive(pid)))
        emit(f"{what}_jobs_lost", lost)
        self.summary.append(
            f"{what} after kill -9: "
            + (f"`hachi queue` answered in {answered:.1f} s; " if answered is not None else "")
            + (f"every agent back, every job running in {met:.1f} s"
                                         if met is not None else
                                         f"not back within {RESTART_TIMEOUT:.0f} s ({last})")
            + f"; {lost} of {len(jobs)} jobs lost 5 s later")

    # ---- clean-up: only what this run started, by pid
    def cleanup(self):
        log("cleaning up")
        if self.server and self.server.poll() is None:
            ids = self.job_ids() or []
            for i in range(0, len(ids), 200):
                self.cli(["cancel"] + [str(j) for j in ids[i:i + 200]], "unix")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(alive(p) for p in self.pid_files().values()):
                time.sleep(0.25)
        self.stop(list(self.agents.values()))
        # Jobs whose cancel did not get through: their process groups (the agent's
        # `__job-waiter` leads each), identified by the pid the job wrote.
        for pid in self.pid_files().values():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if not f.read().startswith(b"sleep"):
                        continue
                pgid = os.getpgid(pid)
                with open(f"/proc/{pgid}/cmdline", "rb") as f:
                    leader = f.read()
                if b"__job-waiter" in leader:
                    os.killpg(pgid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.stop([p for p in (self.server, self.server_b) if p])
        if os.environ.get("KEEP"):
            log(f"kept {self.dir} (logs)")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def stop(procs):
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 15
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main():
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    hachi, n = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    if not os.access(hachi, os.X_OK):
        print(f"agents.py: {hachi} is not an executable", file=sys.stderr)
        return 1
    need = n * AGENT_MB + min(ARRAY, n * GPUS_PER_NODE) * JOB_MB + n * JOB_MB + SPARE_MB
    have = mem_available_mb()
    if have < need:
        print(f"agents.py: {n} agents need about {need} MiB ({AGENT_MB} per agent, {JOB_MB} per "
              f"running job, {SPARE_MB} spare); MemAvailable is {have} MiB: not starting",
              file=sys.stderr)
        return 2
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    log((f"open-files limit raised from {soft} to the hard limit {hard}" if soft < hard else
         f"open-files limit already at the hard limit {hard}")
        + f" (the server and agents inherit it); MemAvailable {have} MiB, about {need} needed")
    if hard < 2 * n + 1024:
        log(f"warning: a hard open-files limit of {hard} is low for {n} agents "
            "(the server holds a descriptor per agent connection)")
    emit("binary", hachi)
    emit("version", subprocess.run([hachi, "--version"], capture_output=True,
                                   text=True).stdout.strip().replace(" ", "_"))
    emit("nofile_limit", hard)
    emit("cpus", os.cpu_count())

    bench = Bench(hachi, n)

    def on_signal(_signum, _frame):
        raise KeyboardInterrupt  # clean up as on Ctrl-C (compare.py's bound sends SIGTERM)

    signal.signal(signal.SIGTERM, on_signal)
    try:
        log(f"server on 127.0.0.1:{bench.port}, state in {bench.state}")
        if not bench.start_server():
            print("agents.py: the server did not start", file=sys.stderr)
            return 1
        if STORE and not bench.start_standby():
            print("agents.py: the standby server did not start", file=sys.stderr)
            return 1
        bench.register()
        if bench.probe():
            bench.resources()
        else:
            emit("server_threads", int(proc_status(bench.server.pid).get("Threads", "0")))
            emit("server_fds", proc_fds(bench.server.pid))
            bench.summary.append("resources: skipped the idle measure, the API does not answer")
        bench.latency()
        bench.array()
        bench.resources("_after_array")
        bench.restart()
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        bench.cleanup()
        print(f"# summary: {n} agents, {hachi}", flush=True)
        for line in bench.summary:
            print(f"#   {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
