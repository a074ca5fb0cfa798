// A real `hachi server` and `hachi agent` for the attack tests (attack_e2e_test.cc,
// flood_e2e_test.cc): the fixture that starts them as root, and the raw clients the
// attacks are made of. Tests only.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_testing.h"
#include "core/testing/paths.h"

namespace hachi::cli::attack {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::CmdResult;
using testing::Hachi;
using testing::ReadFile;

inline pid_t Spawn(const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

inline void StopPid(pid_t pid, int sig = SIGTERM) {
  if (pid <= 0) return;
  ::kill(pid, sig);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(milliseconds(100));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

inline int Connect(const std::string& unix_path, int port) {
  if (!unix_path.empty()) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", unix_path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 &&
        errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 &&
      errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Holds `n` connections that each send one byte of a request head a second, never
// finishing it, reconnecting when the server cuts one; until `end`. Returns how many
// connections it opened in all.
inline int SlowClients(const std::string& unix_path, int port, int n,
                       steady_clock::time_point end) {
  const std::string head = "GET /api/v1/jobs HTTP/1.1\r\nX-Slow: ";
  std::vector<int> fds(static_cast<size_t>(n), -1);
  std::vector<size_t> sent(fds.size(), 0);
  int opened = 0;
  while (steady_clock::now() < end) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0) {
        fds[i] = Connect(unix_path, port);
        sent[i] = 0;
        if (fds[i] >= 0) ++opened;
        continue;
      }
      char byte = sent[i] < head.size() ? head[sent[i]] : 'a';
      if (::send(fds[i], &byte, 1, MSG_NOSIGNAL) != 1 && errno != EAGAIN) {
        ::close(fds[i]);
        fds[i] = -1;
        continue;
      }
      ++sent[i];
      char buf[512];
      if (::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT) == 0) {  // cut by the server
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
    std::this_thread::sleep_for(milliseconds(1000));
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  return opened;
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class AttackE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0)
      GTEST_SKIP() << "needs root (the slow Unix clients run as nobody)";
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    char tmpl[] = "/tmp/hachi-attack-e2e-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0755);
    ::mkdir((dir_ + "/run").c_str(), 0755);
    socket_ = dir_ + "/run/hachi.sock";
    server_log_ = dir_ + "/server.log";
    server_ =
        Spawn(server_prefix_ + BinaryDir() + "/hachi server --state-dir " + dir_ +
              "/state --listen 127.0.0.1:0 --socket " + socket_ + " 2>" + server_log_);
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      std::this_thread::sleep_for(milliseconds(50));
      const std::string text = ReadFile(server_log_);
      const size_t at = text.find("listening on http://127.0.0.1:");
      if (at != std::string::npos) port_ = std::atoi(text.c_str() + at + 30);
    }
    ASSERT_GT(port_, 0) << ReadFile(server_log_);
    ::setenv("HACHI_SERVER", ("unix:" + socket_).c_str(), 1);
    StartAgent();
  }
  void TearDown() override {
    // The job first, while its agent still runs to stop it (an agent stopped with
    // SIGTERM leaves its jobs running, by design); then what is left of it, by its pid.
    if (job_ > 0) {
      Hachi("cancel " + std::to_string(job_));
      for (int i = 0; i < 200 && Job(job_).value("state", "") == "RUNNING"; ++i) {
        std::this_thread::sleep_for(milliseconds(100));
      }
    }
    StopPid(agent_);
    StopPid(server_);
    const int pid = std::atoi(ReadFile(dir_ + "/job.pid").c_str());
    if (pid > 1) ::kill(pid, SIGKILL);  // `exec sleep`: the job's own pid
    ::unsetenv("HACHI_SERVER");
    if (!dir_.empty() && !HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  void StartAgent() {
    agent_ = Spawn(BinaryDir() +
                   "/hachi agent --server http://127.0.0.1:" + std::to_string(port_) +
                   " --name victim --preset hgx-h100 --cgroup none --spool-dir " + dir_ +
                   "/spool --cluster-secret-file " + dir_ + "/state/cluster-secret 2>>" +
                   dir_ + "/agent.log");
  }
  bool NodeUp() {
    const CmdResult r = Hachi("nodes -o %t", false);
    return r.out.find("idle") != std::string::npos ||
           r.out.find("mix") != std::string::npos ||
           r.out.find("alloc") != std::string::npos;
  }
  // The agent process the server has registered for the node now ("" if none).
  std::string Instance() {
    const json j =
        json::parse(Hachi("show node victim --json", false).out, nullptr, false);
    if (!j.is_object() || !j.contains("node")) return "";
    return j["node"].value("agent_instance", "");
  }
  // What the API answered while an attack ran.
  struct QueueRun {
    std::vector<double> ms;  // each `hachi queue` answered, in ms
    int failed = 0;
    bool restarted = false, reregistered = false;
  };
  // `hachi queue` every 200 ms until half a second before `end`; at `restart_at` the
  // agent's process goes and comes back (its job keeps running meanwhile), and whether
  // it registered again (an instance other than `first_instance`) is watched.
  QueueRun QueueWhileAgentRestarts(steady_clock::time_point end,
                                   steady_clock::time_point restart_at,
                                   const std::string& first_instance) {
    QueueRun r;
    while (steady_clock::now() < end - milliseconds(500)) {
      const auto t0 = steady_clock::now();
      const CmdResult q = Hachi("queue", false);
      const double ms =
          std::chrono::duration<double, std::milli>(steady_clock::now() - t0).count();
      if (q.exit_code == 0 && q.out.find("JOBID") != std::string::npos) {
        r.ms.push_back(ms);
      } else {
        ++r.failed;
      }
      if (!r.restarted && steady_clock::now() >= restart_at) {
        StopPid(agent_);
        StartAgent();
        r.restarted = true;
      }
      if (r.restarted && !r.reregistered) {
        const std::string now = Instance();
        r.reregistered = !now.empty() && now != first_instance;
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
    return r;
  }
  json Job(int64_t id) {
    const json j = json::parse(
        Hachi("show job " + std::to_string(id) + " --json", false).out, nullptr, false);
    return j.is_object() && j.contains("job") ? j["job"] : json();
  }

  // Put before the server's command line ("prlimit --nofile=N "): set by a derived
  // fixture's constructor.
  std::string server_prefix_;
  std::string dir_, socket_, server_log_;
  pid_t server_ = -1, agent_ = -1;
  int port_ = 0;
  int64_t job_ = 0;
};

}  // namespace hachi::cli::attack
