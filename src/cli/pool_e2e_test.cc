// Burst pools end to end (docs/pools.md): `hachi server` on one network-namespace
// "host" with a fixed node f1 on another and a burst pool b[1-3] whose hosts are
// empty until the pool's resume program starts a real `hachi agent` there; its suspend
// program stops it. The site's burn-in script checks each resumed node before it
// works. Phases, each bounded:
//   A. a gang that needs all three burst nodes resumes them in one call, waits for
//      their burn-in, runs, and the idle nodes are suspended after suspend_after;
//   B. a node that boots broken fails burn-in: powered down, another one resumed;
//   C. a resume program that fails marks its node failed (the failure program runs);
//   D. `hachi resume` clears that; a resume whose node never registers times out.
// Needs root and iproute2; skipped otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_testing.h"
#include "cli/e2e_testing.h"
#include "cli/fleet_testing.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::cli {
namespace {

using nlohmann::json;
using testing::Fleet;
using testing::Hachi;
using testing::ReadFile;

// The pool's programs, as a site would write them for its cloud's API: here the
// "cloud" is the fleet's namespaces. @D@ is the shared directory. The resume program
// fails when @D@/fail-resume exists and starts no agent on a node whose
// @D@/never-NODE exists; the burn-in check fails on a node whose @D@/broken-NODE does.
constexpr char kResume[] = R"sh(#!/bin/sh
D=@D@
echo "resume $1 $HACHI_POOL" >> $D/resume.log
[ -e $D/fail-resume ] && exit 3
for n in $($D/scontrol show hostnames "$1"); do
  [ -e $D/never-$n ] && continue
  ip netns exec $(cat $D/ns-$n) unshare -m --propagation private sh -c \
    "mount -t tmpfs tmpfs /tmp && cd / && exec $D/hachi agent --server $(cat $D/url) \
     --name $n --preset hgx-h100 --cgroup none --spool-dir /tmp/spool \
     --cluster-secret-file $D/state/cluster-secret" >>$D/agent-$n.log 2>&1 </dev/null &
  echo $! > $D/pid-$n
done
)sh";
constexpr char kSuspend[] = R"sh(#!/bin/sh
D=@D@
echo "suspend $1" >> $D/suspend.log
for n in $($D/scontrol show hostnames "$1"); do
  [ -e $D/pid-$n ] && kill $(cat $D/pid-$n) 2>/dev/null
  rm -f $D/pid-$n
done
)sh";
constexpr char kFailed[] = R"sh(#!/bin/sh
echo "failed $1" >> @D@/failed.log
)sh";
constexpr char kCheck[] = R"sh(#!/bin/sh
echo "$HACHI_NODE" >> @D@/check.log
[ ! -e @D@/broken-$HACHI_NODE ] || { echo "FAIL GPU 3: NVLink 2 down"; exit 2; }
)sh";

constexpr char kConfig[] = R"toml(
[[pool]]
name = "owned"
nodes = "f1"
price_per_gpu_hour = 2.0

[[pool]]
name = "burst"
nodes = "b[1-3]"
kind = "burst"
preset = "hgx-h100"
resume_program = "@D@/resume.sh"
suspend_program = "@D@/suspend.sh"
resume_fail_program = "@D@/failed.sh"
suspend_after = "15s"
resume_timeout = "20s"
price_per_gpu_hour = 4.0

[node."b[1-3]"]
burn_in = ["@D@/check.sh"]
)toml";

std::string Fill(std::string text, const std::string& dir) {
  for (size_t at; (at = text.find("@D@")) != std::string::npos;) {
    text.replace(at, 3, dir);
  }
  return text;
}

class PoolE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Fleet::Possible()) GTEST_SKIP() << "needs root and `ip netns` with bridges";
    fleet_ = std::make_unique<Fleet>(5);  // server, f1, b1..b3
    ASSERT_TRUE(fleet_->ok()) << "could not build the fleet's namespaces";
    char tmpl[] = "/var/tmp/hachi-pool-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    hachi_ = Fleet::CopyForHosts(BinaryDir() + "/hachi", dir_);
    ASSERT_FALSE(hachi_.empty());
    std::filesystem::create_symlink(hachi_, dir_ + "/scontrol");
    const std::pair<const char*, const char*> files[] = {{"resume.sh", kResume},
                                                         {"suspend.sh", kSuspend},
                                                         {"failed.sh", kFailed},
                                                         {"check.sh", kCheck},
                                                         {"hachi.toml", kConfig}};
    for (const auto& [name, text] : files) {
      std::ofstream(dir_ + "/" + name) << Fill(text, dir_);
      std::filesystem::permissions(
          dir_ + "/" + name,
          std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
              std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
              std::filesystem::perms::others_exec);
    }
    for (int b = 1; b <= 3; ++b) {
      std::ofstream(dir_ + "/ns-b" + std::to_string(b)) << fleet_->netns(b + 1);
    }
    fleet_->Spawn(0,
                  hachi_ + " server --config " + dir_ + "/hachi.toml --state-dir " +
                      dir_ + "/state --listen " + fleet_->address(0) + ":0",
                  dir_ + "/server.log");
    std::string url;
    ASSERT_TRUE(WaitFor(
        [&] {
          const std::string log = ReadFile(dir_ + "/server.log");
          const size_t at = log.find("listening on http://");
          if (at == std::string::npos) return false;
          url = log.substr(at + 13, log.find_first_of(" \n", at + 13) - (at + 13));
          return true;
        },
        std::chrono::seconds(10)))
        << ReadFile(dir_ + "/server.log");
    std::ofstream(dir_ + "/url") << url;
    ::setenv("HACHI_SERVER", ("unix:" + dir_ + "/state/hachi.sock").c_str(), 1);
    fleet_->Spawn(
        1,
        hachi_ + " agent --server " + url +
            " --name f1 --preset hgx-h100 --cgroup none --spool-dir /tmp/spool" +
            " --cluster-secret-file " + dir_ + "/state/cluster-secret",
        dir_ + "/agent-f1.log");
    ASSERT_TRUE(WaitFor([&] { return State("f1") == "idle"; }, std::chrono::seconds(15)))
        << Hachi("nodes").out << ReadFile(dir_ + "/agent-f1.log");
    cwd_ = std::filesystem::current_path();
    std::filesystem::current_path(dir_);  // the jobs' workdir
  }

  void TearDown() override {
    if (!cwd_.empty()) std::filesystem::current_path(cwd_);
    // The agents the resume program started: stopped as its suspend program would.
    for (int b = 1; b <= 3; ++b) {
      const std::string pid = ReadFile(dir_ + "/pid-b" + std::to_string(b));
      if (!pid.empty()) ::kill(std::atoi(pid.c_str()), SIGKILL);
    }
    fleet_.reset();
    ::unsetenv("HACHI_SERVER");
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
  }

  // `hachi nodes -o "%n %t"`'s state for `node` ("idle~", "mix", ...).
  std::string State(const std::string& node) {
    const std::string out = Hachi("nodes -o '%n %t'", false).out;
    const size_t at = out.find(node + " ");
    if (at == std::string::npos) return "";
    return out.substr(at + node.size() + 1, out.find('\n', at) - (at + node.size() + 1));
  }
  int64_t Submit(const std::string& args) {
    return std::atoll(
        Hachi("submit --parsable -t 10:00 -o " + dir_ + "/%j.out " + args, false)
            .out.c_str());
  }
  std::string Logs() {
    std::string out =
        Hachi("nodes").out + "\nresume.log:\n" + ReadFile(dir_ + "/resume.log") +
        "suspend.log:\n" + ReadFile(dir_ + "/suspend.log") + "failed.log:\n" +
        ReadFile(dir_ + "/failed.log") + "server.log:\n" + ReadFile(dir_ + "/server.log");
    for (int b = 1; b <= 3; ++b) {
      out += "agent-b" + std::to_string(b) + ".log:\n" +
             ReadFile(dir_ + "/agent-b" + std::to_string(b) + ".log");
    }
    return out;
  }

  std::unique_ptr<Fleet> fleet_;
  std::string dir_;
  std::string hachi_;
  std::string cwd_;
};

TEST_F(PoolE2e, PeaksResumeBurnedInNodesAndIdleOnesAreSuspended) {
  for (int b = 1; b <= 3; ++b) EXPECT_EQ(State("b" + std::to_string(b)), "idle~");
  // f1 busy: anything more needs the burst pool.
  const int64_t blocker = Submit("--gpus 8 -- /bin/sleep 600");
  ASSERT_TRUE(WaitFor([&] { return ShownJob(blocker)["state"] == "RUNNING"; },
                      std::chrono::seconds(15)))
      << Logs();

  // A. A 3-node gang: all three burst nodes in one resume, burned in, then it runs.
  const int64_t gang = Submit("-N 3 --gpus-per-node 8 -- /bin/sleep 1");
  ASSERT_GT(gang, 0);
  ASSERT_TRUE(WaitFor([&] { return ShownJob(gang)["state"] == "COMPLETED"; },
                      std::chrono::seconds(60)))
      << ShownJob(gang).dump() << Logs();
  EXPECT_EQ(ReadFile(dir_ + "/resume.log"), "resume b[1-3] burst\n");
  const json ran = ShownJob(gang);
  std::string nodes;
  for (const json& a : ran["allocations"]) nodes += a["node"].get<std::string>() + " ";
  EXPECT_EQ(nodes, "b1 b2 b3 ") << ran.dump();
  const std::string checked = ReadFile(dir_ + "/check.log");
  for (const char* b : {"b1", "b2", "b3"}) {
    EXPECT_NE(checked.find(b), std::string::npos) << checked;
  }
  // Idle for suspend_after (15 s): suspended, their agents stopped.
  ASSERT_TRUE(WaitFor([&] { return State("b3") == "idle~"; }, std::chrono::seconds(45)))
      << Logs();
  EXPECT_EQ(ReadFile(dir_ + "/suspend.log"), "suspend b[1-3]\n");
  EXPECT_EQ(State("f1"), "alloc");  // a fixed node is never suspended
  // What the three nodes were powered, from their resume until off, in the report: at
  // least the gang's second and the 15 s idle on each, at most this test's minutes.
  const std::string report = Hachi("report --by pool").out;
  const size_t powered = report.find("Burst pools powered");
  ASSERT_NE(powered, std::string::npos) << report;
  std::istringstream rows(report.substr(powered));
  double gpu_hours = -1;
  for (std::string line; std::getline(rows, line);) {
    std::istringstream cells(line);
    std::string pool;
    int pool_nodes = 0, now = -1;
    if (cells >> pool >> pool_nodes >> now >> gpu_hours && pool == "burst") break;
    gpu_hours = -1;
  }
  EXPECT_GT(gpu_hours, 3 * 8 * 16 / 3600.0) << report;
  EXPECT_LT(gpu_hours, 3 * 8 * 600 / 3600.0) << report;

  // B. b1 boots broken: its burn-in fails, it is powered down, b2 is resumed instead.
  std::ofstream(dir_ + "/broken-b1");
  const int64_t second = Submit("--gpus 8 -- /bin/sleep 600");
  ASSERT_TRUE(WaitFor([&] { return ShownJob(second)["state"] == "RUNNING"; },
                      std::chrono::seconds(60)))
      << ShownJob(second).dump() << Logs();
  EXPECT_EQ(ShownJob(second)["allocations"][0]["node"], "b2");
  EXPECT_EQ(State("b1"), "down~") << Logs();
  EXPECT_NE(ReadFile(dir_ + "/failed.log").find("failed b1"), std::string::npos);

  // C. The resume program fails: b3 is marked failed, the failure program runs.
  std::ofstream(dir_ + "/fail-resume");
  const int64_t third = Submit("--gpus 8 -- /bin/sleep 600");
  ASSERT_TRUE(WaitFor([&] { return State("b3") == "down~"; }, std::chrono::seconds(20)))
      << Logs();
  EXPECT_NE(ReadFile(dir_ + "/failed.log").find("failed b3"), std::string::npos);
  EXPECT_EQ(ShownJob(third)["state"], "PENDING");

  // D. An admin clears b3's failure; its next resume never registers and times out.
  std::filesystem::remove(dir_ + "/fail-resume");
  std::ofstream(dir_ + "/never-b3");
  const testing::CmdResult reset = Hachi("resume b3");
  ASSERT_EQ(reset.exit_code, 0) << reset.out;
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string log = ReadFile(dir_ + "/resume.log");
        return log.find("resume b3") != log.rfind("resume b3");  // twice
      },
      std::chrono::seconds(15)))
      << Logs();
  EXPECT_EQ(State("b3"), "idle#");
  ASSERT_TRUE(WaitFor([&] { return State("b3") == "down~"; }, std::chrono::seconds(40)))
      << Logs();
  const std::string shown = Hachi("show node b3").out;
  EXPECT_NE(shown.find("did not register within 20s"), std::string::npos) << shown;
  EXPECT_EQ(ShownJob(third)["state"], "PENDING");
}

}  // namespace
}  // namespace hachi::cli
