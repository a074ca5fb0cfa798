// Floods against a real `hachi server` and `hachi agent` (the fixture of
// attack_testing.h), each with the server's memory watched:
//   - idle keep-alive connections from five loopback addresses, each under the
//     per-address bound, more in all than the server's connection limit (its open
//     files, 16,384 here), re-opened as soon as they are cut: `hachi queue` on the socket
//     still answers (median under 100 ms), and the agent restarted meanwhile registers
//     again over TCP;
//   - one connection that pipelines 8,000 `GET /jobs?all=1` and never reads;
//   - 200 connections that each announce and send a 4 MiB body, anonymous, then as
//     one user with a token.
// Each flood's growth of the server's resident memory is printed; the goal is under
// 64 MiB. HACHI_ATTACK_SECONDS sets the idle flood's length (default 15).
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>

#include "cli/attack_testing.h"

namespace hachi::cli {
namespace {

using namespace attack;  // NOLINT(build/namespaces): the fixture and its clients

// A non-blocking TCP connection to 127.0.0.1:`port` from `source`; -1 when refused.
int ConnectFrom(const char* source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 &&
       errno != EINPROGRESS)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int64_t RssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return 0;
}

// The server's resident memory, its peak while `run` goes, over its value before.
template <typename F>
int64_t PeakGrowth(pid_t server, F&& run) {
  const int64_t before = RssBytes(server);
  std::atomic<int64_t> peak{before};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done.load()) {
      peak = std::max(peak.load(), RssBytes(server));
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  run();
  std::this_thread::sleep_for(milliseconds(300));  // what the server still does
  done = true;
  sampler.join();
  return peak.load() - before;
}

// Writes `data` on every connection as far as its socket takes it, for `duration`;
// reads (and keeps) what comes back. Returns the replies' first lines.
std::vector<std::string> Pour(std::vector<int>& fds, const std::string& data,
                              milliseconds duration) {
  std::vector<size_t> sent(fds.size(), 0);
  std::vector<std::string> got(fds.size());
  const auto end = steady_clock::now() + duration;
  while (steady_clock::now() < end) {
    bool any = false;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0) continue;
      any = true;
      char buf[4096];
      const ssize_t r = ::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
      if (r > 0) got[i].append(buf, static_cast<size_t>(std::min<ssize_t>(r, 200)));
      if (r == 0 || (r < 0 && errno != EAGAIN)) {
        ::close(fds[i]);
        fds[i] = -1;
        continue;
      }
      if (sent[i] < data.size()) {
        const ssize_t n = ::send(fds[i], data.data() + sent[i],
                                 std::min<size_t>(data.size() - sent[i], 256 << 10),
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) sent[i] += static_cast<size_t>(n);
      }
    }
    if (!any) break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  std::vector<std::string> first;
  for (const std::string& g : got) first.push_back(g.substr(0, g.find("\r\n")));
  return first;
}

int Count(const std::vector<std::string>& lines, const std::string& prefix) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const auto& l) {
    return l.rfind(prefix, 0) == 0;
  }));
}

// The server with fewer descriptors than this process may open, so that the flood
// passes its connection limit, as the flood that locked everyone out did (19,742
// connections against a limit of 20,000 less 256).
class SmallServerE2e : public AttackE2e {
 protected:
  SmallServerE2e() { server_prefix_ = "prlimit --nofile=16384:16384 "; }
};

TEST_F(SmallServerE2e, IdleConnectionsFromFiveAddressesLockNoOneOut) {
  const char* env = std::getenv("HACHI_ATTACK_SECONDS");
  const int seconds = env != nullptr ? std::max(5, std::atoi(env)) : 15;
  for (int i = 0; i < 100 && !NodeUp(); ++i)
    std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(NodeUp()) << ReadFile(dir_ + "/agent.log");
  const std::string first_instance = Instance();
  ASSERT_FALSE(first_instance.empty());
  // As many connections as this process may open, spread over five addresses: each
  // address stays under the server's bound of 4,096, all of them over its TCP room.
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  const int per_source = static_cast<int>(
      std::min<rlim_t>(4000, (std::min<rlim_t>(lim.rlim_cur, 1 << 20) - 600) / 5));
  if (per_source * 5 <= 16384) {
    GTEST_SKIP() << "this process may open " << lim.rlim_cur
                 << " descriptors: too few to flood a server of 16,384";
  }
  const char* sources[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5",
                           "127.0.0.6"};
  const auto end = steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<int> opened{0}, cut{0};
  std::thread flood([&] {
    std::vector<int> fds(static_cast<size_t>(per_source) * 5, -1);
    while (steady_clock::now() < end) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i] < 0) {
          fds[i] = ConnectFrom(sources[i % 5], port_);
          if (fds[i] >= 0) ++opened;
          continue;
        }
        char buf[512];
        const ssize_t r = ::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != ENOTCONN)) {
          ::close(fds[i]);
          fds[i] = -1;
          ++cut;
        } else if (r < 0 && i % 2 == 0) {
          // Half of them ask once, then stay as idle keep-alive connections.
          static const std::string kHealth = "GET /api/v1/health HTTP/1.1\r\n\r\n";
          (void)!::send(fds[i], kHealth.data(), kHealth.size(),
                        MSG_NOSIGNAL | MSG_DONTWAIT);
        }
      }
      std::this_thread::sleep_for(milliseconds(500));
    }
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  });
  std::this_thread::sleep_for(milliseconds(2000));  // the flood is up

  const QueueRun run = QueueWhileAgentRestarts(
      end, steady_clock::now() + std::chrono::seconds(seconds / 3), first_instance);
  flood.join();
  const double median = Median(run.ms);
  std::printf(
      "idle flood: %d s, %d connections held from 5 addresses, %d opened, %d cut by the "
      "server; %zu queue calls, median %.1f ms, %d failed; agent re-registered: %s\n",
      seconds, per_source * 5, opened.load(), cut.load(), run.ms.size(), median,
      run.failed, run.reregistered ? "yes" : "no");
  EXPECT_GT(opened.load(), per_source * 5);  // the server made room by cutting some
  EXPECT_EQ(run.failed, 0);
  EXPECT_LT(median, 100.0);
  EXPECT_TRUE(run.restarted);
  EXPECT_TRUE(run.reregistered) << ReadFile(dir_ + "/agent.log");
}

TEST_F(AttackE2e, PipelinesAndBodiesDoNotGrowTheServer) {
  for (int i = 0; i < 100 && !NodeUp(); ++i)
    std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(NodeUp()) << ReadFile(dir_ + "/agent.log");
  // Something to list: 300 held tasks (a listing of ~150 KB).
  ASSERT_EQ(Hachi("submit -H --array=1-300 -G 1 -o /dev/null --wrap true").exit_code, 0);
  CmdResult token = Hachi("token create alice --uid 4242 --gid 4242", false);
  ASSERT_EQ(token.exit_code, 0) << token.out;
  while (!token.out.empty() && std::isspace(static_cast<unsigned char>(token.out.back())))
    token.out.pop_back();

  // One anonymous connection pipelines 8,000 listings and never reads a reply.
  std::string pipeline;
  for (int i = 0; i < 8000; ++i) pipeline += "GET /api/v1/jobs?all=1 HTTP/1.1\r\n\r\n";
  std::vector<int> one = {ConnectFrom("127.0.0.1", port_)};
  const int64_t pipelined = PeakGrowth(server_, [&] {
    for (size_t i = 0; i < pipeline.size() && one[0] >= 0;) {
      const ssize_t n = ::send(one[0], pipeline.data() + i, pipeline.size() - i,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        i += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINPROGRESS) {
        break;
      } else {
        pollfd p{one[0], POLLOUT, 0};
        if (::poll(&p, 1, 100) <= 0) break;  // the server stopped reading: as meant
      }
    }
    std::this_thread::sleep_for(milliseconds(3000));
  });
  ::close(one[0]);

  // 200 connections announce 4 MiB each and send it: anonymous first.
  const std::string body(4 << 20, 'x');
  auto flood = [&](const std::string& auth) {
    std::vector<int> fds;
    for (int i = 0; i < 200; ++i) fds.push_back(ConnectFrom("127.0.0.1", port_));
    const std::string head =
        "POST /api/v1/jobs HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n" + auth + "\r\n";
    std::vector<std::string> replies;
    const int64_t grew = PeakGrowth(
        server_, [&] { replies = Pour(fds, head + body, milliseconds(6000)); });
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
    return std::make_pair(grew, replies);
  };
  const auto [anonymous, anonymous_replies] = flood("");
  const auto [user, user_replies] = flood("Authorization: Bearer " + token.out + "\r\n");

  std::printf(
      "floods, the server's resident memory grew by: pipelined listings %.1f MiB; "
      "200 x 4 MiB bodies anonymous %.1f MiB (%d refused on the head), as one user "
      "%.1f MiB (%d over the user's bound, %d read and refused as bad JSON)\n",
      pipelined / 1048576.0, anonymous / 1048576.0,
      Count(anonymous_replies, "HTTP/1.1 401"), user / 1048576.0,
      Count(user_replies, "HTTP/1.1 503"), Count(user_replies, "HTTP/1.1 400"));
  EXPECT_LT(pipelined, int64_t{64} << 20);
  EXPECT_LT(anonymous, int64_t{64} << 20);
  EXPECT_LT(user, int64_t{64} << 20);
  EXPECT_EQ(Count(anonymous_replies, "HTTP/1.1 401"), 200);
  EXPECT_GT(Count(user_replies, "HTTP/1.1 503"), 150);
  EXPECT_GE(Count(user_replies, "HTTP/1.1 400"), 1);
  // And it serves as before.
  const CmdResult q = Hachi("queue", false);
  EXPECT_EQ(q.exit_code, 0);
  EXPECT_NE(q.out.find("JOBID"), std::string::npos) << q.out;
}

}  // namespace
}  // namespace hachi::cli
