// A fleet of simulated hosts for the end-to-end tests that need more than one machine
//: a server on one "host", agents on others, each with its own address and
// its own /tmp, joined by a switch whose ports the test can cut. Test-only, header-only.
//
// Everything lives in network namespaces this object creates; the root namespace's
// addresses, links and sysctls are never touched, so a test cannot break the machine's
// own networking and two test binaries running at once do not collide.
//
// Address plan (k = pid % 200 + 20, so concurrent test processes use different subnets):
//   switch  netns hachi-sw-<pid>      bridge br0; port p<i> for host i (the veth's
//                                     bridge-side end: Cut/Heal set it down/up)
//   host i  netns hachi-h<i>-<pid>    eth0 = 10.79.<k>.<i+1>/24, lo up
// Host 0 is 10.79.<k>.1, host 1 is 10.79.<k>.2, and so on; every host reaches every
// other through the bridge. A host's 127.0.0.1 is its own.
//
// A wired host (the constructor's `wired`) is joined by a lossy wire instead of a veth
// (the kernel here has no netem): a TAP p<i> on the switch's bridge, a TAP eth0 in the
// host, and tests/faults/wire.py forwarding frames between the two, which SetWire tells
// to drop, delay or blackhole each direction ("a2b" is switch -> host, "b2a" host ->
// switch). Cut/Heal work on a wired host too.
//
// Spawn runs a command in a host's netns and in a private mount namespace with a tmpfs
// /tmp (what scripts/scale-netns.sh does), so two "hosts" never share /tmp files or
// sockets; anything that must be shared (a secret, output files) goes under another
// directory, e.g. /var/tmp. The tmpfs hides the machine's /tmp, and with it a checkout
// cloned there: a host runs the hachi binary that CopyForHosts put in such a directory.
//
// Not thread-safe: one test thread drives it. Needs root and iproute2; Possible() says
// whether both are there so a test can GTEST_SKIP with the reason.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::cli::testing {

class Fleet {
 public:
  // Root and a working `ip netns` with bridges: what the constructor needs.
  static bool Possible() {
    if (::geteuid() != 0) return false;
    const std::string probe = "hachi-probe-" + std::to_string(::getpid());
    const bool ok = Run("ip netns add " + probe) &&
                    Run("ip -n " + probe + " link add br0 type bridge");
    Run("ip netns del " + probe);
    return ok;
  }

  // Builds the switch and `hosts` hosts; ok() says whether all of it worked (on a
  // failure, what was made is still torn down by the destructor). The hosts in `wired`
  // are joined by a lossy wire (above) whose control socket and log go in `wire_dir`
  // (outside /tmp; the test's to remove).
  explicit Fleet(int hosts, const std::vector<int>& wired = {},
                 const std::string& wire_dir = "")
      : pid_(::getpid()), subnet_(pid_ % 200 + 20), wire_dir_(wire_dir) {
    const std::string sw = SwitchNetns();
    ok_ = Run("ip netns add " + sw);
    if (ok_) made_.push_back(sw);
    ok_ = ok_ && Run("ip -n " + sw + " link set lo up") &&
          Run("ip -n " + sw + " link add br0 type bridge") &&
          Run("ip -n " + sw + " link set br0 up");
    for (int i = 0; ok_ && i < hosts; ++i) {
      const std::string ns = netns(i);
      ok_ = Run("ip netns add " + ns);
      if (!ok_) break;
      made_.push_back(ns);
      ++hosts_;
      // Both ends are created inside namespaces: p<i> in the switch, eth0 in the host.
      const std::string port = Port(i);
      const bool wire = std::find(wired.begin(), wired.end(), i) != wired.end();
      ok_ = (wire ? Run("ip -n " + sw + " tuntap add dev " + port + " mode tap") &&
                        Run("ip -n " + ns + " tuntap add dev eth0 mode tap")
                  : Run("ip -n " + sw + " link add " + port +
                        " type veth peer name eth0 netns " + ns)) &&
            Run("ip -n " + sw + " link set " + port + " master br0") &&
            Run("ip -n " + sw + " link set " + port + " up") &&
            Run("ip -n " + ns + " link set lo up") &&
            Run("ip -n " + ns + " addr add " + address(i) + "/24 dev eth0") &&
            Run("ip -n " + ns + " link set eth0 up") && (!wire || StartWire(i));
    }
  }

  ~Fleet() {
    const std::vector<pid_t> pids = spawned_;  // Stop erases from spawned_
    for (pid_t pid : pids) Stop(pid);
    // The wires last, so that what the others said on their way out got through; each
    // logs its counters as it exits.
    for (const auto& [host, pid] : wires_) StopPid(pid);
    // Deleting a namespace deletes the links in it (and so each veth's peer).
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) Run("ip netns del " + *it);
  }

  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  bool ok() const { return ok_; }
  int hosts() const { return hosts_; }
  std::string address(int i) const {
    return "10.79." + std::to_string(subnet_) + "." + std::to_string(i + 1);
  }
  std::string netns(int i) const {
    return "hachi-h" + std::to_string(i) + "-" + std::to_string(pid_);
  }

  // `binary` copied into `shared_dir` (outside /tmp), its new path; "" when the copy
  // fails. What every host can run wherever the checkout lives. A copy rather than
  // binding the build directory back in under the tmpfs: a host's /tmp then holds only
  // what the host wrote, as on a machine of its own.
  static std::string CopyForHosts(const std::string& binary,
                                  const std::string& shared_dir) {
    const std::filesystem::path to =
        std::filesystem::path(shared_dir) / std::filesystem::path(binary).filename();
    std::error_code ec;
    std::filesystem::copy_file(binary, to,
                               std::filesystem::copy_options::overwrite_existing, ec);
    return ec ? std::string() : to.string();
  }

  // Runs `shell_cmd` (through sh -c) on host i with a private tmpfs /tmp, from /, stdout
  // and stderr appended to `log_path`. The returned pid is the command's own (every
  // layer execs), so Stop(pid) signals it directly. -1 when fork fails. `shell_cmd`
  // names no path under /tmp that the host did not make (CopyForHosts); the test's
  // working directory, which may be under the hidden /tmp, is left behind for /.
  pid_t Spawn(int host, const std::string& shell_cmd, const std::string& log_path) {
    const std::string inner = "mount -t tmpfs tmpfs /tmp && cd / && exec " + shell_cmd;
    const std::string cmd = "exec ip netns exec " + netns(host) +
                            " unshare -m --propagation private sh -c " + Quote(inner) +
                            " >>" + Quote(log_path) + " 2>&1 </dev/null";
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);  // the test's terminal signals do not reach it; Stop does
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    if (pid > 0) spawned_.push_back(pid);
    return pid;
  }

  // SIGTERM, up to 10 s for it to exit, then SIGKILL. Only pids this Fleet spawned.
  void Stop(pid_t pid) {
    auto it = std::find(spawned_.begin(), spawned_.end(), pid);
    if (it == spawned_.end() || pid <= 0) return;
    spawned_.erase(it);
    StopPid(pid);
  }

  // SIGKILL (kill -9: a crash, no chance to clean up) and reap. Only pids this Fleet
  // spawned; what the process left behind (a job waiter) lives on.
  void Kill(pid_t pid) {
    auto it = std::find(spawned_.begin(), spawned_.end(), pid);
    if (it == spawned_.end() || pid <= 0) return;
    spawned_.erase(it);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }

  // Whether a spawned pid is still running (false once it has exited and been reaped).
  bool Alive(pid_t pid) {
    if (pid <= 0 || ::waitpid(pid, nullptr, WNOHANG) == 0) return pid > 0;
    std::erase(spawned_, pid);  // reaped: its pid may be reused, so never signal it again
    return false;
  }

  // Host i's switch port down (its traffic to every other host drops) / up again.
  bool Cut(int host) {
    return Run("ip -n " + SwitchNetns() + " link set " + Port(host) + " down");
  }
  bool Heal(int host) {
    return Run("ip -n " + SwitchNetns() + " link set " + Port(host) + " up");
  }

  // One command to host i's wire (tests/faults/wire.py: "a2b drop", "both loss=0.3
  // delay=200", "b2a pass", "both clear", "stats"); whether it answered "ok", which
  // means the change is in effect. Its answer in `*reply` when given.
  bool SetWire(int host, const std::string& command, std::string* reply = nullptr) {
    std::string answer;
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = WireSocket(host);
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    const timeval limit{5, 0};  // the wire answers at once; a hung one fails the call
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    const std::string line = command + "\n";
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size())) {
      std::array<char, 1024> buf;
      ssize_t n;
      while ((n = ::read(fd, buf.data(), buf.size())) > 0) answer.append(buf.data(), n);
    }
    ::close(fd);
    if (reply != nullptr) *reply = answer;
    return answer.rfind("ok", 0) == 0;
  }
  // Where host i's wire logs its commands and, on exit, its counters.
  std::string wire_log(int host) const {
    return wire_dir_ + "/wire-" + std::to_string(host) + ".log";
  }

  // A short command on host i (its netns, the shared /tmp); its stdout.
  std::string Exec(int host, const std::string& cmd) {
    std::string out;
    FILE* p =
        ::popen(("ip netns exec " + netns(host) + " sh -c " + Quote(cmd)).c_str(), "r");
    if (p == nullptr) return out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    ::pclose(p);
    return out;
  }

  // `s` as one single-quoted shell word.
  static std::string Quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }

 private:
  static bool Run(const std::string& cmd) {
    return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
  }

  // SIGTERM, up to 10 s for it to exit, then SIGKILL.
  static void StopPid(pid_t pid) {
    ::kill(pid, SIGTERM);
    if (WaitFor([&] { return ::waitpid(pid, nullptr, WNOHANG) == pid; },
                std::chrono::seconds(10), std::chrono::milliseconds(100))) {
      return;
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }

  std::string WireSocket(int host) const {
    return wire_dir_ + "/wire-" + std::to_string(host) + ".sock";
  }

  // tests/faults/wire.py between the switch's p<i> and host i's eth0, run from the
  // root namespace (it enters each side's to attach); true once it answers.
  bool StartWire(int host) {
    if (wire_dir_.empty()) return false;
    const std::string cmd =
        "exec python3 " + Quote(SourceDir() + "/tests/faults/wire.py") +
        " --a-netns /run/netns/" + SwitchNetns() + " --a-dev " + Port(host) +
        " --b-netns /run/netns/" + netns(host) + " --b-dev eth0 --control " +
        Quote(WireSocket(host)) + " --parent " + std::to_string(pid_) + " >>" +
        Quote(wire_log(host)) + " 2>&1 </dev/null";
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    if (pid < 0) return false;
    wires_[host] = pid;
    return WaitFor([&] { return SetWire(host, "stats"); }, std::chrono::seconds(10),
                   std::chrono::milliseconds(50));
  }
  std::string SwitchNetns() const { return "hachi-sw-" + std::to_string(pid_); }
  static std::string Port(int host) { return "p" + std::to_string(host); }

  const pid_t pid_;
  const int subnet_;
  const std::string wire_dir_;
  bool ok_ = false;
  int hosts_ = 0;
  std::vector<std::string> made_;  // namespaces, in creation order
  std::vector<pid_t> spawned_;
  std::map<int, pid_t> wires_;  // host -> its wire's pid
};

}  // namespace hachi::cli::testing
