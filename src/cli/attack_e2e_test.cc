// The server under attack ("Must show: Under attack"): a real `hachi server`
// and `hachi agent`, with 500 slow-header TCP connections from an unauthenticated
// client and 300 slow Unix-socket connections of one local user (nobody) held open for
// the whole run (each sends a byte a second and reconnects when cut). Meanwhile:
// `hachi queue` answers (median under 100 ms), the agent restarted mid-attack
// registers again, the running job is not lost; after it a chunked 300 MiB body is
// refused without the server reading it.
//
// HACHI_ATTACK_SECONDS sets the attack's length (default 15 here; `make bench` runs 60).
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

namespace hachi::cli {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::CmdResult;
using testing::Hachi;
using testing::ReadFile;

pid_t Spawn(const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

void StopPid(pid_t pid, int sig = SIGTERM) {
  if (pid <= 0) return;
  ::kill(pid, sig);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(milliseconds(100));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

int Connect(const std::string& unix_path, int port) {
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
int SlowClients(const std::string& unix_path, int port, int n,
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

double Median(std::vector<double> v) {
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
        Spawn(BinaryDir() + "/hachi server --state-dir " + dir_ +
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
  json Job(int64_t id) {
    const json j = json::parse(
        Hachi("show job " + std::to_string(id) + " --json", false).out, nullptr, false);
    return j.is_object() && j.contains("job") ? j["job"] : json();
  }

  std::string dir_, socket_, server_log_;
  pid_t server_ = -1, agent_ = -1;
  int port_ = 0;
  int64_t job_ = 0;
};

TEST_F(AttackE2e, SlowClientsNeitherStallTheApiNorLoseAJob) {
  const char* env = std::getenv("HACHI_ATTACK_SECONDS");
  const int seconds = env != nullptr ? std::max(5, std::atoi(env)) : 15;
  for (int i = 0; i < 100 && !NodeUp(); ++i)
    std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(NodeUp()) << ReadFile(dir_ + "/agent.log");
  // It writes its pid for TearDown to stop it should its agent not have.
  const CmdResult sub = Hachi("submit --parsable -G 1 -o /dev/null --wrap 'echo $$ > " +
                                  dir_ + "/job.pid; exec sleep 600'",
                              false);
  ASSERT_EQ(sub.exit_code, 0) << sub.out;
  const int64_t job = std::stoll(sub.out);
  job_ = job;
  for (int i = 0; i < 100 && Job(job).value("state", "") != "RUNNING"; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  const json before = Job(job);
  ASSERT_EQ(before.value("state", ""), "RUNNING") << before.dump();
  const std::string first_instance = Instance();
  ASSERT_FALSE(first_instance.empty()) << Hachi("show node victim --json").out;

  const auto end = steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<int> tcp_opened{0};
  std::thread tcp([&] { tcp_opened = SlowClients("", port_, 500, end); });
  // One local user, not root: the Unix socket's per-uid bound applies to it.
  const pid_t nobody = ::fork();
  if (nobody == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    SlowClients(socket_, 0, 300, end);
    ::_exit(0);
  }
  std::this_thread::sleep_for(milliseconds(1500));  // all 800 connect

  std::vector<double> queue_ms;
  int queue_failed = 0;
  bool restarted = false, reregistered = false;
  const auto restart_at = steady_clock::now() + std::chrono::seconds(seconds / 3);
  while (steady_clock::now() < end - milliseconds(500)) {
    const auto t0 = steady_clock::now();
    const CmdResult q = Hachi("queue", false);
    const double ms =
        std::chrono::duration<double, std::milli>(steady_clock::now() - t0).count();
    if (q.exit_code == 0 && q.out.find("JOBID") != std::string::npos) {
      queue_ms.push_back(ms);
    } else {
      ++queue_failed;
    }
    if (!restarted && steady_clock::now() >= restart_at) {
      // The agent's process goes and comes back (its job keeps running meanwhile).
      StopPid(agent_);
      StartAgent();
      restarted = true;
    }
    if (restarted && !reregistered) {
      const std::string now = Instance();
      reregistered = !now.empty() && now != first_instance;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  tcp.join();
  int status = 0;
  ::waitpid(nobody, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the nobody client";

  const double median = Median(queue_ms);
  std::printf(
      "attack: %d s, 500 slow TCP + 300 slow Unix; %zu queue calls, median %.1f ms, "
      "%d failed; %d TCP connections opened\n",
      seconds, queue_ms.size(), median, queue_failed, tcp_opened.load());
  EXPECT_GE(queue_ms.size(), static_cast<size_t>(seconds));
  EXPECT_EQ(queue_failed, 0);
  EXPECT_LT(median, 100.0);
  EXPECT_GE(tcp_opened.load(), 500);
  EXPECT_TRUE(restarted);
  EXPECT_TRUE(reregistered) << ReadFile(dir_ + "/agent.log");
  const json after = Job(job);
  EXPECT_EQ(after.value("state", ""), "RUNNING") << after.dump();
  EXPECT_EQ(after.value("start_time", int64_t{0}),
            before.value("start_time", int64_t{-1}));

  // A chunked 300 MiB body: refused once past the 4 MiB limit, not read to its end.
  const int fd = Connect("", port_);
  ASSERT_GE(fd, 0);
  pollfd w{fd, POLLOUT, 0};
  ::poll(&w, 1, 2000);
  const std::string head =
      "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(head.size()));
  const std::string chunk = "100000\r\n" + std::string(1 << 20, 'x') + "\r\n";
  size_t sent = 0, off = 0;
  std::string reply;
  const auto stop = steady_clock::now() + std::chrono::seconds(20);
  while (sent < (size_t{300} << 20) && steady_clock::now() < stop) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) break;
    const ssize_t n =
        ::send(fd, chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
    off = (off + static_cast<size_t>(n)) % chunk.size();
  }
  char buf[4096];
  for (int i = 0; i < 20; ++i) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  std::printf("chunked body: %zu bytes sent before the refusal\n", sent);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply.substr(0, 300);
  EXPECT_LT(sent, size_t{40} << 20);
  EXPECT_EQ(Job(job).value("state", ""), "RUNNING");
}

}  // namespace
}  // namespace hachi::cli
