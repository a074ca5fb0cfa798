// A network partition between an agent and the server (fencing: docs/fencing.md),
// with real processes on simulated hosts (cli/fleet_testing.h): `hachi server` on host
// 0, the agent of node "cut" on host 1, the agent of node "other" on host 2, each in its
// own network namespace with its own /tmp. The test cuts host 1's link for longer than
// the fence and then heals it. Needs root and `ip netns`; skipped otherwise.
//
// Every job writes its runs to a file in a shared directory ("start <date +%s.%N>
// <node> <CUDA_VISIBLE_DEVICES>", "end <time> <node>" when SIGTERM stops it), and the
// test judges from those: never two runs of one job at once, never two jobs on one GPU
// at once, the non-requeue job stopped by its own agent within the lease, the requeued
// job started once more, after the fence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_testing.h"
#include "cli/fleet_testing.h"
#include "cli/job_runs_testing.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::cli {
namespace {

using nlohmann::json;
using testing::Fleet;
using testing::Hachi;
using testing::Job;
using testing::JobRun;
using testing::Now;
using testing::ReadFile;
using testing::ReadRuns;

// Short, so that the test takes well under a minute: the node is down 3 s after its
// agent's last contact, the agent stops its jobs at 3 s, the server counts them dead at
// 3 + 2 (kill grace) + 5 (margin) = 10 s.
constexpr int kTimeout = 3;
constexpr int kLease = 3;
constexpr int kGrace = 2;
constexpr int kMargin = 5;  // ControllerOptions::fence_margin's default
constexpr int kFence = kLease + kGrace + kMargin;
constexpr int kCutSeconds = kFence + 4;

TEST(Partition, CutNodeFencedNoJobTwiceNoGpuTwice) {
  if (!Fleet::Possible()) GTEST_SKIP() << "needs root and `ip netns` with bridges";
  Fleet fleet(3);
  ASSERT_TRUE(fleet.ok()) << "could not build the fleet's namespaces";
  // Shared by every host (their /tmp is their own).
  char tmpl[] = "/var/tmp/hachi-partition-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string hachi = Fleet::CopyForHosts(BinaryDir() + "/hachi", dir);
  ASSERT_FALSE(hachi.empty()) << "could not copy hachi into " << dir;
  fleet.Spawn(0,
              hachi + " server --state-dir " + dir + "/state --listen " +
                  fleet.address(0) + ":0 --agent-timeout " + std::to_string(kTimeout) +
                  " --lease " + std::to_string(kLease) + " --kill-grace " +
                  std::to_string(kGrace),
              dir + "/server.log");
  std::string url;
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string log = ReadFile(dir + "/server.log");
        const size_t at = log.find("listening on http://");
        if (at == std::string::npos) return false;
        url = log.substr(at + 13, log.find_first_of(" \n", at + 13) - (at + 13));
        return true;
      },
      std::chrono::seconds(10)))
      << ReadFile(dir + "/server.log");
  // The CLI as a local user on the server's Unix socket (a file: any namespace reaches
  // it); the agents over TCP with the secret the server made.
  ::setenv("HACHI_SERVER", ("unix:" + dir + "/state/hachi.sock").c_str(), 1);
  auto agent = [&](int host, const std::string& name) {
    fleet.Spawn(host,
                hachi + " agent --server " + url + " --name " + name +
                    " --preset hgx-h100 --address " + fleet.address(host) +
                    " --spool-dir " + dir + "/spool-" + name + " --cluster-secret-file " +
                    dir + "/state/cluster-secret",
                dir + "/agent-" + name + ".log");
    return WaitFor(
        [&] { return Hachi("nodes -o %n", false).out.find(name) != std::string::npos; },
        std::chrono::seconds(15));
  };
  ASSERT_TRUE(agent(1, "cut")) << ReadFile(dir + "/agent-cut.log");

  std::ofstream(dir + "/job.sh") << "f=" << dir << "/$HACHI_JOB_ID.runs\n"
                                 << "echo \"start $(date +%s.%N) $HACHI_NODENAME "
                                    "$CUDA_VISIBLE_DEVICES\" >> $f\n"
                                 << "trap 'echo \"end $(date +%s.%N) $HACHI_NODENAME\" "
                                    ">> $f; exit 143' TERM\n"
                                 << "sleep 300 & wait\n";
  const std::string cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);  // the jobs' workdir: on every host
  auto submit = [&](const std::string& flags) {
    return std::atoll(
        Hachi("submit --parsable " + flags + " -- sh " + dir + "/job.sh", false)
            .out.c_str());
  };
  auto runs_file = [&](int64_t id) { return dir + "/" + std::to_string(id) + ".runs"; };
  auto started = [&](int64_t id) { return ReadFile(runs_file(id)).find("start") == 0; };
  // The cut node's 8 GPUs: a --requeue job and a plain one.
  const int64_t requeue = submit("-G 4 -t 10:00 --requeue");
  const int64_t plain = submit("-G 4 -t 10:00");
  ASSERT_GT(requeue, 0);
  ASSERT_GT(plain, 0);
  ASSERT_TRUE(WaitFor([&] { return started(requeue) && started(plain); },
                      std::chrono::seconds(15)))
      << Job(requeue).dump() << Job(plain).dump();
  // The other node: half taken, so that the requeued job fits there and the pending
  // 8-GPU job fits only the cut node. (The filler's limit is the longest: the 8-GPU job's
  // reservation there, at the filler's end, does not keep the requeued one off.)
  ASSERT_TRUE(agent(2, "other")) << ReadFile(dir + "/agent-other.log");
  const int64_t filler = submit("-G 4 -t 60:00");
  ASSERT_TRUE(WaitFor([&] { return started(filler); }, std::chrono::seconds(15)))
      << Job(filler).dump();
  const int64_t pending = submit("-G 8 -t 10:00");
  ASSERT_GT(pending, 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(Job(pending)["state"], "PENDING");

  const double cut_at = Now();
  ASSERT_TRUE(fleet.Cut(1));
  // Down at the timeout, but its jobs stay RUNNING with the wait said, with a number.
  EXPECT_TRUE(WaitFor(
      [&] {
        return Hachi("nodes -o \"%n %t\"", false).out.find("cut down") !=
               std::string::npos;
      },
      std::chrono::seconds(kTimeout + 4)));
  const json r = Job(requeue);
  EXPECT_EQ(r["state"], "RUNNING") << r.dump();
  EXPECT_NE(r.value("reason", "")
                .find("waiting for node cut's lease to expire before "
                      "requeue, "),
            std::string::npos)
      << r.dump();
  EXPECT_EQ(Job(plain)["state"], "RUNNING");
  EXPECT_EQ(Job(pending)["state"], "PENDING");
  // Past the fence: the plain job NODE_FAIL, the requeued one running on the other node.
  EXPECT_TRUE(WaitFor([&] { return Job(plain)["state"] == "NODE_FAIL"; },
                      std::chrono::seconds(kFence + 4)))
      << Job(plain).dump();
  EXPECT_TRUE(WaitFor(
      [&] {
        const json j = Job(requeue);
        return j["state"] == "RUNNING" && j["requeues"] == 1;
      },
      std::chrono::seconds(6)))
      << Job(requeue).dump();
  std::this_thread::sleep_for(
      std::chrono::duration<double>(std::max(0.0, cut_at + kCutSeconds - Now())));
  ASSERT_TRUE(fleet.Heal(1));
  const double healed_at = Now();

  // Back: the cut node takes the 8-GPU job once its agent has reported the old runs.
  EXPECT_TRUE(WaitFor([&] { return started(pending); }, std::chrono::seconds(30)))
      << Job(pending).dump() << "\n"
      << ReadFile(dir + "/agent-cut.log");

  std::map<int64_t, std::vector<JobRun>> runs;
  for (int64_t id : {requeue, plain, filler, pending}) {
    ASSERT_TRUE(ReadRuns(id, runs_file(id), &runs[id])) << "job " << id;
  }
  // The plain job: one run, on the cut node, stopped by its agent within the lease (its
  // last answered call was sent at most two polls, 2 x lease / 6, before the cut).
  ASSERT_EQ(runs[plain].size(), 1u) << ReadFile(runs_file(plain));
  EXPECT_EQ(runs[plain][0].node, "cut");
  EXPECT_GE(runs[plain][0].end, cut_at + kLease * 2.0 / 3 - 0.5)
      << "stopped before its lease ran out";
  EXPECT_LE(runs[plain][0].end, cut_at + kLease + 2) << "stopped late";
  // The requeued job: its first run stopped the same way, its second on the other node,
  // started once, after the fence.
  ASSERT_EQ(runs[requeue].size(), 2u) << ReadFile(runs_file(requeue));
  EXPECT_EQ(runs[requeue][0].node, "cut");
  EXPECT_LE(runs[requeue][0].end, cut_at + kLease + 2);
  EXPECT_EQ(runs[requeue][1].node, "other");
  EXPECT_GE(runs[requeue][1].start, runs[requeue][0].end);
  EXPECT_GE(runs[requeue][1].start, cut_at + kFence - 1.5) << "before the fence";
  EXPECT_LT(runs[requeue][1].start, healed_at) << "during the cut";
  ASSERT_EQ(runs[pending].size(), 1u);
  EXPECT_EQ(runs[pending][0].node, "cut");
  EXPECT_GE(runs[pending][0].start, healed_at);
  // No GPU had two runs at once.
  std::vector<JobRun> all;
  for (const auto& [id, rs] : runs) all.insert(all.end(), rs.begin(), rs.end());
  for (const JobRun& run : all)
    EXPECT_EQ(run.gpus.size(), run.job == pending ? 8u : 4u) << run.job;
  testing::ExpectNoGpuTwice(all);

  // Their processes must not outlive the test (an agent stopped keeps its jobs).
  for (int64_t id : {requeue, filler, pending})
    Hachi("cancel " + std::to_string(id), false);
  EXPECT_TRUE(WaitFor(
      [&] {
        return Job(requeue)["state"] == "CANCELLED" &&
               Job(filler)["state"] == "CANCELLED" &&
               Job(pending)["state"] == "CANCELLED";
      },
      std::chrono::seconds(kGrace + 10)));
  std::filesystem::current_path(cwd);
  ::unsetenv("HACHI_SERVER");
  if (!HasFailure()) std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace hachi::cli
