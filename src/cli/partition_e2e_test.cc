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
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_testing.h"
#include "cli/fleet_testing.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::cli {
namespace {

using nlohmann::json;
using testing::Fleet;
using testing::Hachi;

// Short, so that the test takes well under a minute: the node is down 3 s after its
// agent's last contact, the agent stops its jobs at 3 s, the server counts them dead at
// 3 + 2 (kill grace) + 5 (margin) = 10 s.
constexpr int kTimeout = 3;
constexpr int kLease = 3;
constexpr int kGrace = 2;
constexpr int kMargin = 5;  // ControllerOptions::fence_margin's default
constexpr int kFence = kLease + kGrace + kMargin;
constexpr int kCutSeconds = kFence + 4;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double Now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json Job(int64_t id) {
  json j = json::parse(Hachi("show job " + std::to_string(id) + " --json", false).out,
                       nullptr, false);
  return j.is_object() && j.contains("job") ? j["job"] : json();
}

// One run of a job, from its file.
struct JobRun {
  int64_t job = 0;
  std::string node;
  std::vector<int> gpus;
  double start = 0;
  double end = std::numeric_limits<double>::infinity();  // still running
};

// The runs in `path`, in order; false (with a test failure) when the file is not a
// sequence of start/end pairs, i.e. a run began while the last one still ran.
bool ReadRuns(int64_t job, const std::string& path, std::vector<JobRun>* out) {
  std::istringstream in(Slurp(path));
  bool open = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    std::string what, node, gpus;
    double at = 0;
    l >> what >> at >> node >> gpus;
    if (what == "start") {
      if (open) {
        ADD_FAILURE() << "job " << job << ": a run started before the last one ended:\n"
                      << Slurp(path);
        return false;
      }
      JobRun r;
      r.job = job;
      r.node = node;
      r.start = at;
      std::stringstream g(gpus);
      for (std::string x; std::getline(g, x, ',');)
        r.gpus.push_back(std::atoi(x.c_str()));
      out->push_back(r);
      open = true;
    } else if (what == "end") {
      if (!open) {
        ADD_FAILURE() << "job " << job << ": an end without a start:\n" << Slurp(path);
        return false;
      }
      out->back().end = at;
      open = false;
    }
  }
  return true;
}

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
        const std::string log = Slurp(dir + "/server.log");
        const size_t at = log.find("listening on http://");
        if (at == std::string::npos) return false;
        url = log.substr(at + 13, log.find_first_of(" \n", at + 13) - (at + 13));
        return true;
      },
      std::chrono::seconds(10)))
      << Slurp(dir + "/server.log");
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
  ASSERT_TRUE(agent(1, "cut")) << Slurp(dir + "/agent-cut.log");

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
  auto started = [&](int64_t id) { return Slurp(runs_file(id)).find("start") == 0; };
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
  ASSERT_TRUE(agent(2, "other")) << Slurp(dir + "/agent-other.log");
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
      << Slurp(dir + "/agent-cut.log");

  std::map<int64_t, std::vector<JobRun>> runs;
  for (int64_t id : {requeue, plain, filler, pending}) {
    ASSERT_TRUE(ReadRuns(id, runs_file(id), &runs[id])) << "job " << id;
  }
  // The plain job: one run, on the cut node, stopped by its agent within the lease (its
  // last answered call was sent at most two polls, 2 x lease / 6, before the cut).
  ASSERT_EQ(runs[plain].size(), 1u) << Slurp(runs_file(plain));
  EXPECT_EQ(runs[plain][0].node, "cut");
  EXPECT_GE(runs[plain][0].end, cut_at + kLease * 2.0 / 3 - 0.5)
      << "stopped before its lease ran out";
  EXPECT_LE(runs[plain][0].end, cut_at + kLease + 2) << "stopped late";
  // The requeued job: its first run stopped the same way, its second on the other node,
  // started once, after the fence.
  ASSERT_EQ(runs[requeue].size(), 2u) << Slurp(runs_file(requeue));
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
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].gpus.size(), all[i].job == pending ? 8u : 4u) << all[i].job;
    for (size_t j = i + 1; j < all.size(); ++j) {
      const JobRun& a = all[i];
      const JobRun& b = all[j];
      if (a.node != b.node) continue;
      const bool share = std::any_of(a.gpus.begin(), a.gpus.end(), [&](int g) {
        return std::find(b.gpus.begin(), b.gpus.end(), g) != b.gpus.end();
      });
      const bool overlap = a.start < b.end && b.start < a.end;
      EXPECT_FALSE(share && overlap)
          << "jobs " << a.job << " and " << b.job << " on one GPU of " << a.node
          << " at once: [" << a.start << ", " << a.end << ") and [" << b.start << ", "
          << b.end << ")";
    }
  }

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
