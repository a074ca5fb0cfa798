// A network partition between an agent and the server (issue 7 §1), with real processes:
// `hachi server` in this network namespace, `hachi agent` in one of its own joined by a
// veth pair whose link the test cuts and restores. Needs root and iproute2; skipped
// otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_testing.h"

namespace hachi::cli {
namespace {

using nlohmann::json;
using testing::Hachi;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

pid_t Spawn(const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

void Stop(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// A network namespace joined to this one by a veth pair: 10.77.N.1 here, 10.77.N.2 there.
class Netns {
 public:
  Netns() {
    const int n = ::getpid() % 200 + 20;
    name_ = "hachi-pt-" + std::to_string(::getpid());
    host_if_ = "hpt" + std::to_string(::getpid() % 100000);
    host_ip_ = "10.77." + std::to_string(n) + ".1";
    ns_ip_ = "10.77." + std::to_string(n) + ".2";
    ok_ = Sh("ip netns add " + name_) &&
          Sh("ip link add " + host_if_ + " type veth peer name npt0 netns " + name_) &&
          Sh("ip addr add " + host_ip_ + "/30 dev " + host_if_) &&
          Sh("ip link set " + host_if_ + " up") &&
          Sh("ip netns exec " + name_ + " ip addr add " + ns_ip_ + "/30 dev npt0") &&
          Sh("ip netns exec " + name_ + " ip link set npt0 up") &&
          Sh("ip netns exec " + name_ + " ip link set lo up");
  }
  ~Netns() {
    Sh("ip link del " + host_if_);
    Sh("ip netns del " + name_);
  }
  bool ok() const { return ok_; }
  bool Cut() { return Sh("ip link set " + host_if_ + " down"); }
  bool Restore() { return Sh("ip link set " + host_if_ + " up"); }
  const std::string& name() const { return name_; }
  const std::string& host_ip() const { return host_ip_; }
  const std::string& ns_ip() const { return ns_ip_; }

 private:
  std::string name_, host_if_, host_ip_, ns_ip_;
  bool ok_ = false;
};

json Job(int64_t id) {
  json j = json::parse(Hachi("show job " + std::to_string(id) + " --json", false).out,
                       nullptr, false);
  return j.is_object() && j.contains("job") ? j["job"] : json();
}

template <typename Pred>
bool WaitFor(Pred done, int seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return done();
}

// Both jobs run on the agent's node when the link is cut. Past the agent timeout the
// server takes the node down: the plain job ends NODE_FAIL, the --requeue one waits. The
// agent keeps running both meanwhile (it cannot tell a partition from a server restart).
// When the link is back the agent re-registers, is told to stop both old runs, and the
// requeued job runs again there only after its old run has exited: never two at once.
TEST(Partition, AgentCutOffAndBackRunsNoJobTwiceAtOnce) {
  if (::geteuid() != 0 || !Sh("command -v ip")) GTEST_SKIP() << "needs root and iproute2";
  Netns net;
  ASSERT_TRUE(net.ok()) << "could not create the namespace and veth pair";
  char tmpl[] = "/tmp/hachi-partition-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string hachi = std::string(HACHI_BINARY_DIR) + "/hachi";
  const pid_t server =
      Spawn(hachi + " server --state-dir " + dir + "/state --listen " + net.host_ip() +
            ":0 --agent-timeout 12 2>" + dir + "/server.log");
  std::string url;
  for (int i = 0; i < 100 && url.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string log = Slurp(dir + "/server.log");
    const size_t at = log.find("listening on http://");
    if (at != std::string::npos)
      url = log.substr(at + 13, log.find(' ', at + 13) - (at + 13));
  }
  ASSERT_FALSE(url.empty()) << Slurp(dir + "/server.log");
  // The CLI as a local user, on the Unix socket (TCP would need a token); the agent over
  // TCP, with the secret the server made in its state directory.
  ::setenv("HACHI_SERVER", ("unix:" + dir + "/state/hachi.sock").c_str(), 1);
  const pid_t agent =
      Spawn("ip netns exec " + net.name() + " " + hachi + " agent --server " + url +
            " --name pnode --preset hgx-h100 --address " + net.ns_ip() + " --spool-dir " +
            dir + "/spool --cluster-secret-file " + dir + "/state/cluster-secret 2>" +
            dir + "/agent.log");
  ASSERT_TRUE(WaitFor(
      [] { return Hachi("nodes -o %n", false).out.find("pnode") != std::string::npos; },
      10))
      << Slurp(dir + "/agent.log");

  const std::string body = "'echo start $(date +%s%N) >> " + dir +
                           "/$HACHI_JOB_ID.runs; trap \"echo end $(date +%s%N) >> " +
                           dir +
                           "/$HACHI_JOB_ID.runs; exit 143\" TERM; sleep 120 & wait'";
  auto submit = [&](const std::string& flags) {
    return std::atoll(
        Hachi("submit --parsable -G 4 -t 10:00 " + flags + " -- sh -c " + body, false)
            .out.c_str());
  };
  const int64_t plain = submit("");
  const int64_t requeue = submit("--requeue");
  ASSERT_GT(plain, 0);
  ASSERT_GT(requeue, 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        return Job(plain)["state"] == "RUNNING" && Job(requeue)["state"] == "RUNNING";
      },
      10));
  ASSERT_TRUE(WaitFor(
      [&] { return Slurp(dir + "/" + std::to_string(requeue) + ".runs") != ""; }, 10));

  ASSERT_TRUE(net.Cut());
  EXPECT_TRUE(WaitFor([&] { return Job(plain)["state"] == "NODE_FAIL"; }, 30))
      << Job(plain).dump();
  EXPECT_EQ(Job(requeue)["state"], "PENDING");
  EXPECT_NE(Hachi("nodes -o \"%n %t\"", false).out.find("pnode down"), std::string::npos);
  ASSERT_TRUE(net.Restore());

  // Back: the requeued job runs again once its first run has been stopped.
  EXPECT_TRUE(WaitFor(
      [&] { return Job(requeue)["state"] == "RUNNING" && Job(requeue)["requeues"] == 1; },
      60))
      << Job(requeue).dump() << "\n"
      << Slurp(dir + "/agent.log");
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::string runs = Slurp(dir + "/" + std::to_string(requeue) + ".runs");
        return runs.find("start", runs.find("end")) != std::string::npos;
      },
      30));
  std::istringstream runs(Slurp(dir + "/" + std::to_string(requeue) + ".runs"));
  std::vector<std::pair<std::string, long long>> events;
  for (std::string what; runs >> what;) {
    long long at = 0;
    runs >> at;
    events.emplace_back(what, at);
  }
  ASSERT_GE(events.size(), 3u) << Slurp(dir + "/" + std::to_string(requeue) + ".runs");
  EXPECT_EQ(events[0].first, "start");
  EXPECT_EQ(events[1].first, "end")
      << "the first run was stopped before the second began";
  EXPECT_EQ(events[2].first, "start");
  EXPECT_LE(events[1].second, events[2].second);
  const std::string plain_runs = Slurp(dir + "/" + std::to_string(plain) + ".runs");
  EXPECT_TRUE(WaitFor(
      [&] {
        return Slurp(dir + "/" + std::to_string(plain) + ".runs").find("end") !=
               std::string::npos;
      },
      30))
      << "the NODE_FAIL job's processes were stopped when the agent came back: "
      << plain_runs;
  EXPECT_EQ(Job(plain)["state"], "NODE_FAIL");

  Hachi("cancel " + std::to_string(requeue), false);
  Stop(agent);
  Stop(server);
  ::unsetenv("HACHI_SERVER");
  if (!HasFailure()) std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace hachi::cli
