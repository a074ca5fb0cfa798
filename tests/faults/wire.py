#!/usr/bin/env python3
"""A lossy Ethernet wire between two TAP devices in two network namespaces.

The kernel of the test machines has no netem and no packet filter, so the faults of a
real network (loss, delay, a link that carries one direction only) are made here, in
user space: the fleet (src/cli/fleet_testing.h) creates a TAP on each side -- "a" in
the switch's namespace, enslaved to its bridge, "b" in a host's, with the host's
address -- and this process attaches to both (setns(2), then TUNSETIFF) and forwards
every frame from one to the other, dropping or holding it as told.

Per direction (a2b: switch -> host, b2a: host -> switch):
  loss=F     drop each frame with probability F (0..1)
  delay=MS   hold each frame MS milliseconds (a time-ordered queue, never a sleep)
  drop       drop everything (a blackhole: the carrier stays up)
  pass       end the blackhole (loss and delay stay as set)
  clear      loss 0, delay 0, pass

Control: a Unix stream socket (--control); a client sends one line per connection,
"<a2b|b2a|both> <words...>", "stats" or "quit", and reads one line back: "ok ..." once
the change is in effect, or "error ...". The wire exits on "quit", SIGTERM/SIGINT, or
when its parent dies, and prints its counters (frames passed and dropped, per
direction) on exit. Standard library only.
"""

import argparse
import ctypes
import fcntl
import heapq
import os
import random
import select
import signal
import socket
import struct
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
PR_SET_PDEATHSIG = 1

FRAME_MAX = 65536
# Frames held per direction at most (a 200 ms delay at line rate would hold more than a
# test's traffic ever needs); beyond it a frame is dropped and counted as overflow.
QUEUE_MAX = 4096
# Frames read from one TAP per wake-up, so that one busy side cannot starve the other
# or the control socket.
BURST = 64
# The longest poll: how late a parent's death or a due frame can be noticed.
TICK_S = 0.5

_libc = ctypes.CDLL(None, use_errno=True)


class Stop(Exception):
    """Raised by the signal handler: unwinds the loop so the counters get printed."""


def enter_netns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "setns %s: %s" % (path, os.strerror(err)))
    finally:
        os.close(fd)


def attach_tap(netns, name):
    """An fd on TAP `name` of the namespace at path `netns` (the device must exist)."""
    enter_netns(netns)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    ifr = struct.pack("16sH22x", name.encode(), IFF_TAP | IFF_NO_PI)
    fcntl.ioctl(fd, TUNSETIFF, ifr)
    return fd


class Direction:
    """One way of the wire: its settings, its held frames and its counters."""

    def __init__(self, name, src, dst, rng):
        self.name, self.src, self.dst, self.rng = name, src, dst, rng
        self.loss = 0.0
        self.delay_s = 0.0
        self.blackhole = False
        self.held = []  # (due, seq, frame): a heap, due on the monotonic clock
        self.seq = 0
        self.passed = self.lost = self.blackholed = self.overflow = 0

    def set(self, words):
        for w in words:
            if w == "drop":
                self.blackhole = True
            elif w == "pass":
                self.blackhole = False
            elif w == "clear":
                self.loss, self.delay_s, self.blackhole = 0.0, 0.0, False
            elif w.startswith("loss="):
                loss = float(w[5:])
                if not 0.0 <= loss <= 1.0:
                    raise ValueError("loss must be in [0, 1]: " + w)
                self.loss = loss
            elif w.startswith("delay="):
                delay = float(w[6:])
                if not 0.0 <= delay <= 60000.0:
                    raise ValueError("delay must be in [0, 60000] ms: " + w)
                self.delay_s = delay / 1000.0
            else:
                raise ValueError("unknown word: " + w)

    def describe(self):
        return "%s loss=%g delay=%g %s" % (self.name, self.loss, self.delay_s * 1000,
                                           "drop" if self.blackhole else "pass")

    def counters(self):
        return "%s passed=%d lost=%d blackholed=%d overflow=%d held=%d" % (
            self.name, self.passed, self.lost, self.blackholed, self.overflow,
            len(self.held))

    def take(self, now):
        """Reads up to BURST frames from src and drops or queues each."""
        for _ in range(BURST):
            try:
                frame = os.read(self.src, FRAME_MAX)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the device went away (its namespace deleted)
                return
            if not frame:
                return
            if self.blackhole:
                self.blackholed += 1
            elif self.loss > 0 and self.rng.random() < self.loss:
                self.lost += 1
            elif len(self.held) >= QUEUE_MAX:
                self.overflow += 1
            else:
                self.seq += 1
                heapq.heappush(self.held, (now + self.delay_s, self.seq, frame))

    def flush(self, now):
        """Writes every held frame that is due; returns when the next one is (or None)."""
        while self.held and self.held[0][0] <= now:
            _, _, frame = heapq.heappop(self.held)
            try:
                os.write(self.dst, frame)
                self.passed += 1
            except OSError:  # a full queue or a device going down: the frame is lost
                self.overflow += 1
        return self.held[0][0] if self.held else None


class Wire:
    def __init__(self, a, b, control_path, parent, seed):
        rng = random.Random(seed)
        self.dirs = {"a2b": Direction("a2b", a, b, rng),
                     "b2a": Direction("b2a", b, a, rng)}
        self.parent = parent
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            os.unlink(control_path)
        except FileNotFoundError:
            pass
        self.control.bind(control_path)
        self.control.listen(8)
        self.control.setblocking(False)
        self.running = True

    def command(self, line):
        words = line.split()
        if not words:
            return "error empty command"
        if words[0] == "quit":
            self.running = False
            return "ok quit"
        if words[0] == "stats":
            return "ok " + "; ".join(d.counters() for d in self.dirs.values())
        targets = (list(self.dirs.values()) if words[0] == "both"
                   else [self.dirs[words[0]]] if words[0] in self.dirs else None)
        if targets is None:
            return "error unknown direction: " + words[0]
        try:
            for d in targets:
                d.set(words[1:])
        except ValueError as e:
            return "error %s" % e
        return "ok " + "; ".join(d.describe() for d in targets)

    def serve_one(self):
        try:
            conn, _ = self.control.accept()
        except (BlockingIOError, InterruptedError):
            return
        with conn:
            # A client sends its line at once; one that does not is dropped after 2 s
            # rather than hold the frames up.
            conn.settimeout(2.0)
            data = b""
            try:
                while b"\n" not in data and len(data) < 4096:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                line = data.decode(errors="replace").strip()
                reply = self.command(line)
                print("wire: %s -> %s" % (line, reply), flush=True)
                conn.sendall((reply + "\n").encode())
            except OSError:
                pass

    def run(self):
        poller = select.poll()
        fds = {d.src: d for d in self.dirs.values()}
        for fd in fds:
            poller.register(fd, select.POLLIN)
        poller.register(self.control.fileno(), select.POLLIN)
        while self.running:
            now = time.monotonic()
            dues = [d.flush(now) for d in self.dirs.values()]
            dues = [t for t in dues if t is not None]
            wait = min([TICK_S] + [max(0.0, t - now) for t in dues])
            for fd, _ in poller.poll(int(wait * 1000) + (1 if wait > 0 else 0)):
                if fd == self.control.fileno():
                    self.serve_one()
                elif fd in fds:
                    fds[fd].take(time.monotonic())
            if os.getppid() != self.parent:
                print("wire: parent %d is gone" % self.parent, flush=True)
                return

    def report(self):
        for d in self.dirs.values():
            print("wire: " + d.counters(), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a-netns", required=True, help="path of side a's netns")
    p.add_argument("--a-dev", required=True, help="side a's TAP device")
    p.add_argument("--b-netns", required=True, help="path of side b's netns")
    p.add_argument("--b-dev", required=True, help="side b's TAP device")
    p.add_argument("--control", required=True, help="Unix socket path for commands")
    p.add_argument("--parent", type=int, default=os.getppid(),
                   help="exit when this pid is no longer the parent (default: ours)")
    p.add_argument("--seed", type=int, default=None, help="the loss's random seed")
    args = p.parse_args()

    def on_signal(signum, _frame):
        raise Stop("signal %d" % signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # The kernel tells us when the parent dies; the getppid check covers a death
    # before this call.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != args.parent:
        return 1
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    a = attach_tap(args.a_netns, args.a_dev)
    b = attach_tap(args.b_netns, args.b_dev)
    if _libc.setns(home, CLONE_NEWNET) != 0:
        return 1
    os.close(home)
    wire = Wire(a, b, args.control, args.parent, args.seed)
    print("wire: %s:%s <-> %s:%s, control %s" % (args.a_netns, args.a_dev, args.b_netns,
                                                   args.b_dev, args.control), flush=True)
    try:
        wire.run()
    except Stop as e:
        print("wire: stopped by %s" % e, flush=True)
    finally:
        wire.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
