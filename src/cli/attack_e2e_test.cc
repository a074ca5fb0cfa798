// The server under attack ("Must show: Under attack"): a real `hachi server`
// and `hachi agent`, with 500 slow-header TCP connections from an unauthenticated
// client and 300 slow Unix-socket connections of one local user (nobody) held open for
// the whole run (each sends a byte a second and reconnects when cut). Meanwhile:
// `hachi queue` answers (median under 100 ms), the agent restarted mid-attack
// registers again, the running job is not lost; after it an anonymous chunked 300 MiB
// body is refused without the server reading it.
//
// HACHI_ATTACK_SECONDS sets the attack's length (default 15 here; `make bench` runs 60).
#include <gtest/gtest.h>

#include "cli/attack_testing.h"

namespace hachi::cli {
namespace {

using namespace attack;  // NOLINT(build/namespaces): the fixture and its clients

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

  const QueueRun run = QueueWhileAgentRestarts(
      end, steady_clock::now() + std::chrono::seconds(seconds / 3), first_instance);
  tcp.join();
  int status = 0;
  ::waitpid(nobody, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the nobody client";

  const double median = Median(run.ms);
  std::printf(
      "attack: %d s, 500 slow TCP + 300 slow Unix; %zu queue calls, median %.1f ms, "
      "%d failed; %d TCP connections opened\n",
      seconds, run.ms.size(), median, run.failed, tcp_opened.load());
  EXPECT_GE(run.ms.size(), static_cast<size_t>(seconds));
  EXPECT_EQ(run.failed, 0);
  EXPECT_LT(median, 100.0);
  EXPECT_GE(tcp_opened.load(), 500);
  EXPECT_TRUE(run.restarted);
  EXPECT_TRUE(run.reregistered) << ReadFile(dir_ + "/agent.log");
  const json after = Job(job);
  EXPECT_EQ(after.value("state", ""), "RUNNING") << after.dump();
  EXPECT_EQ(after.value("start_time", int64_t{0}),
            before.value("start_time", int64_t{-1}));

  // A chunked 300 MiB body from an anonymous caller: refused on its head, not read.
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
  EXPECT_EQ(reply.rfind("HTTP/1.1 401", 0), 0u) << reply.substr(0, 300);
  EXPECT_LT(sent, size_t{40} << 20);
  EXPECT_EQ(Job(job).value("state", ""), "RUNNING");
}

}  // namespace
}  // namespace hachi::cli
