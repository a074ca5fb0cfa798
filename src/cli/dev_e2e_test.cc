// End to end through real processes : `hachi dev` started as a child on
// 127.0.0.1, jobs submitted with the real CLI, run as real processes by the agents.
// What each job prints about itself is checked against what the server says it gave.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/http_client.h"
#include "cli/cli_testing.h"
#include "cli/dev_testing.h"
#include "core/bytes.h"
#include "core/testing/paths.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::cli {
namespace {

using nlohmann::json;
using testing::Hachi;

using testing::ReadFile;

class DevE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-e2e-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    // Jobs without -o write hachi-<id>.out in the submitter's directory: keep it here.
    char cwd[4096];
    old_cwd_ = ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "/";
    if (::chdir(dir_.c_str()) != 0) FAIL() << "chdir " << dir_;
  }
  void TearDown() override {
    if (::chdir(old_cwd_.c_str()) != 0) ADD_FAILURE() << "chdir back";
    if (!HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }

  // All jobs, as the server has them.
  static std::optional<std::map<int64_t, json>> TryJobs() {
    const testing::CmdResult r = Hachi("queue -a --json", false);
    json j = json::parse(r.out, nullptr, false);
    if (r.exit_code != 0 || j.is_discarded() || !j.contains("jobs")) return std::nullopt;
    std::map<int64_t, json> out;
    for (const json& job : j["jobs"]) out[job["id"].get<int64_t>()] = job;
    return out;
  }
  static std::map<int64_t, json> Jobs() {
    return TryJobs().value_or(std::map<int64_t, json>{});
  }
  // Waits until no job is pending or running (or `seconds` pass).
  static bool WaitIdle(int seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      // A listing that failed (the server still starting) says nothing: not idle.
      std::optional<std::map<int64_t, json>> jobs = TryJobs();
      bool busy = !jobs.has_value();
      for (const auto& [id, j] : jobs.value_or(std::map<int64_t, json>{})) {
        const std::string s = j["state"].get<std::string>();
        busy = busy || s == "PENDING" || s == "RUNNING";
      }
      if (!busy) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }
  static std::string StateOf(int64_t id) {
    auto jobs = Jobs();
    return jobs.count(id) ? jobs[id]["state"].get<std::string>() : "";
  }
  static bool WaitState(int64_t id, const std::string& state, int seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (StateOf(id) == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  static int64_t Submit(const std::string& args) {
    const testing::CmdResult r = Hachi("submit --parsable " + args, false);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    return std::atoll(r.out.c_str());
  }

  // `hachi dev` on "real" GPUs served by the fake libnvidia-ml.so.1 (one HGX H100 node),
  // whose events file (faults, processes: fake_nvml.cc) is `events`. Sets `node` to the
  // node's name once it is up; nullptr when it did not start.
  std::unique_ptr<DevCluster> StartOnFakeNvml(const std::string& events,
                                              std::string* node) {
    const std::string topo_path = dir_ + "/topo.json";
    {
      std::ofstream t(topo_path);
      t << topo::TopologyToJson(*topo::LoadPreset("hgx-h100"));
    }
    { std::ofstream e(events); }
    // Real GPUs get burned in before they take jobs: not what these tests are
    // about (burn_in_e2e_test.cc is).
    const std::string config = dir_ + "/no-burn-in.toml";
    std::ofstream(config) << "[burn_in]\nchecks = []\n";
    ::setenv("HACHI_NVML_LIBRARY", FakeNvmlLibrary().c_str(), 1);
    ::setenv("HACHI_FAKE_NVML_TOPOLOGY", topo_path.c_str(), 1);
    ::setenv("HACHI_FAKE_NVML_EVENTS", events.c_str(), 1);
    auto dev = std::make_unique<DevCluster>(dir_, "--config " + config);
    ::unsetenv("HACHI_NVML_LIBRARY");
    ::unsetenv("HACHI_FAKE_NVML_TOPOLOGY");
    ::unsetenv("HACHI_FAKE_NVML_EVENTS");
    if (dev->url().empty()) return nullptr;
    for (int i = 0; i < 100 && node->empty(); ++i) {
      std::istringstream lines(Hachi("nodes -o %n", false).out);
      std::string header;
      std::getline(lines, header);
      std::getline(lines, *node);
      if (node->empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_NE(ReadFile(dir_ + "/dev.log").find("GPU health: NVML events on 8 GPUs"),
              std::string::npos)
        << ReadFile(dir_ + "/dev.log");
    return dev;
  }

  std::string dir_;
  std::string old_cwd_;
};

// 500 short jobs (four arrays of 1, 2, 4 and 8 GPUs): all complete; each prints its
// CUDA_VISIBLE_DEVICES, which equals its allocation; no two jobs that ran at the same
// time on a node shared a GPU (by the jobs' own clocks).
TEST_F(DevE2e, FiveHundredJobsNeverShareAGpu) {
  DevCluster dev(dir_);
  ASSERT_FALSE(dev.url().empty());
  const std::string out = dir_ + "/out";
  ::mkdir(out.c_str(), 0755);
  const std::string body =
      "'echo $CUDA_VISIBLE_DEVICES $HACHI_NODENAME $(date +%s%N); sleep 0.05; date "
      "+%s%N'";
  for (int gpus : {1, 2, 4, 8}) {
    Submit("--array=1-125 -G " + std::to_string(gpus) + " -o " + out +
           "/%j.out -- sh -c " + body);
  }
  ASSERT_TRUE(WaitIdle(240));
  std::map<int64_t, json> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 500u);
  struct Run {
    std::string node;
    std::set<int> gpus;
    long long start, end;
  };
  std::vector<Run> runs;
  for (const auto& [id, j] : jobs) {
    ASSERT_EQ(j["state"], "COMPLETED") << j.dump();
    ASSERT_EQ(j["allocations"].size(), 1u);
    const std::string allocated = j["allocations"][0]["gpus"].get<std::string>();
    std::istringstream in(ReadFile(out + "/" + std::to_string(id) + ".out"));
    std::string cvd, node;
    long long start = 0, end = 0;
    in >> cvd >> node >> start >> end;
    // CUDA_VISIBLE_DEVICES lists the indices; the API writes ranges ("0-3").
    std::set<int> seen;
    std::stringstream list(cvd);
    for (std::string g; std::getline(list, g, ',');) seen.insert(std::stoi(g));
    std::set<int> given;
    std::stringstream alloc(allocated);
    for (std::string part; std::getline(alloc, part, ',');) {
      const size_t dash = part.find('-');
      const int lo = std::stoi(part.substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
      for (int g = lo; g <= hi; ++g) given.insert(g);
    }
    EXPECT_EQ(seen, given) << "job " << id << " printed " << cvd << ", allocated "
                           << allocated;
    EXPECT_EQ(node, j["allocations"][0]["node"].get<std::string>());
    ASSERT_GT(end, start) << "job " << id;
    runs.push_back({node, seen, start, end});
  }
  int overlaps = 0;
  for (size_t a = 0; a < runs.size(); ++a) {
    for (size_t b = a + 1; b < runs.size(); ++b) {
      if (runs[a].node != runs[b].node) continue;
      if (runs[a].end <= runs[b].start || runs[b].end <= runs[a].start) continue;
      for (int g : runs[a].gpus) overlaps += static_cast<int>(runs[b].gpus.count(g));
    }
  }
  EXPECT_EQ(overlaps, 0);
}

TEST_F(DevE2e, ExitCodesTimeLimitCancelOutputFiles) {
  DevCluster dev(dir_);
  ASSERT_FALSE(dev.url().empty());
  // hachi run exits with the job's code and streams its output.
  testing::CmdResult r =
      Hachi("run -G 1 -- sh -c 'echo out-line; echo err-line >&2; exit 7'");
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_NE(r.out.find("out-line"), std::string::npos);
  EXPECT_NE(r.out.find("err-line"), std::string::npos);
  EXPECT_EQ(Hachi("run -G 1 -- true").exit_code, 0);
  // Killed by a signal: 128 + signal, like a shell.
  EXPECT_EQ(Hachi("run -G 1 -- sh -c 'kill -9 $$'").exit_code, 128 + 9);

  // Time limit: 0:02 is two seconds; the job is stopped and ends TIMEOUT.
  const int64_t slow = Submit("-G 1 -t 0:02 -- sleep 60");
  EXPECT_TRUE(WaitState(slow, "TIMEOUT", 20)) << StateOf(slow);

  // Cancel a running job and a pending one.
  const int64_t running = Submit("-G 8 -- sleep 60");
  const int64_t running2 = Submit("-G 8 -- sleep 60");
  const int64_t pending = Submit("-G 8 -- sleep 60");
  ASSERT_TRUE(WaitState(running, "RUNNING", 10));
  ASSERT_TRUE(WaitState(running2, "RUNNING", 10));
  EXPECT_EQ(StateOf(pending), "PENDING");
  EXPECT_EQ(Hachi("cancel " + std::to_string(running) + " " + std::to_string(pending))
                .exit_code,
            0);
  EXPECT_TRUE(WaitState(running, "CANCELLED", 20));
  EXPECT_EQ(StateOf(pending), "CANCELLED");
  EXPECT_EQ(Hachi("cancel " + std::to_string(running2)).exit_code, 0);
  EXPECT_TRUE(WaitState(running2, "CANCELLED", 20));
  EXPECT_NE(Hachi("cancel 99999").exit_code, 0);

  // Output and error files with patterns, relative to the working directory.
  const int64_t named =
      Submit("-G 1 -J named -D " + dir_ +
             " -o '%x-%j.out' -e '%x-%j.err' -- sh -c 'echo hello; echo oops >&2'");
  ASSERT_TRUE(WaitState(named, "COMPLETED", 20));
  EXPECT_EQ(ReadFile(dir_ + "/named-" + std::to_string(named) + ".out"), "hello\n");
  EXPECT_EQ(ReadFile(dir_ + "/named-" + std::to_string(named) + ".err"), "oops\n");

  // A job that can never run is refused at once, with the reason, and nothing is kept.
  r = Hachi("submit -G 9 -- true");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("9 GPUs"), std::string::npos) << r.out;
}

TEST_F(DevE2e, SbatchScriptAndDependencies) {
  DevCluster dev(dir_);
  ASSERT_FALSE(dev.url().empty());
  const std::string script = dir_ + "/job.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                           "#SBATCH --job-name=scripted\n"
                           "#SBATCH --gres=gpu:2\n"
                           "#SBATCH --time=5:00\n"
                           "#SBATCH --output=" +
                               dir_ +
                               "/%x-%j.out\n"
                               "echo \"$HACHI_JOB_NAME $CUDA_VISIBLE_DEVICES $1\"\n";
  const int64_t id = Submit(script + " arg1");
  ASSERT_TRUE(WaitState(id, "COMPLETED", 20)) << StateOf(id);
  const std::string printed = ReadFile(dir_ + "/scripted-" + std::to_string(id) + ".out");
  EXPECT_EQ(printed.substr(0, 9), "scripted ");
  EXPECT_NE(printed.find(" arg1"), std::string::npos);
  std::string cvd = printed.substr(9, printed.find(' ', 9) - 9);
  EXPECT_EQ(std::count(cvd.begin(), cvd.end(), ','), 1) << printed;  // two GPUs

  // after-ok on a failed job never runs; after-any does; after-ok on success does.
  const int64_t bad = Submit("-G 1 -- sh -c 'sleep 1; exit 1'");
  const int64_t good = Submit("-G 1 -- sleep 1");
  const int64_t never = Submit("-G 1 -d afterok:" + std::to_string(bad) + " -- true");
  const int64_t any = Submit("-G 1 -d afterany:" + std::to_string(bad) + " -- true");
  const int64_t ok = Submit("-G 1 -d afterok:" + std::to_string(good) + " -- true");
  EXPECT_EQ(StateOf(any), "PENDING");
  EXPECT_TRUE(WaitState(any, "COMPLETED", 20));
  EXPECT_TRUE(WaitState(ok, "COMPLETED", 20));
  EXPECT_EQ(StateOf(bad), "FAILED");
  EXPECT_EQ(StateOf(never), "PENDING");
  testing::CmdResult show = Hachi("show job " + std::to_string(never));
  EXPECT_NE(show.out.find("Dependency"), std::string::npos) << show.out;
}

// A job without GPUs (Snakemake's and dask's kind, submitted
// without -p) runs to COMPLETED on `hachi dev`'s built-in partition and sees no GPU;
// -w pins a job to a node, -x keeps it off nodes, -C follows a configured feature, and a
// constraint no node has is refused at submit with Slurm's words; --begin holds a job.
TEST_F(DevE2e, CpuJobsAndNodeSelection) {
  const std::string config = dir_ + "/cluster.toml";
  std::ofstream(config) << "[node.\"node2\"]\nfeatures = [\"ib\"]\n";
  DevCluster dev(dir_, "--nodes 3 --config " + config);
  ASSERT_FALSE(dev.url().empty()) << ReadFile(dir_ + "/dev.log");
  auto allocations = [&](int64_t id) -> json {
    json j = json::parse(Hachi("show job " + std::to_string(id) + " --json", false).out,
                         nullptr, false);
    return j.is_object() && j.contains("job") ? j["job"]["allocations"] : json::array();
  };
  auto node_of = [&](int64_t id) -> std::string {
    const json a = allocations(id);
    return a.is_array() && !a.empty() ? a[0]["node"].get<std::string>() : "";
  };

  const int64_t cpu =
      Submit("-c 2 -o " + dir_ + "/cpu.out --wrap 'echo gpus=[$CUDA_VISIBLE_DEVICES]'");
  ASSERT_TRUE(WaitState(cpu, "COMPLETED", 20)) << StateOf(cpu);
  EXPECT_EQ(ReadFile(dir_ + "/cpu.out"), "gpus=[]\n");
  EXPECT_EQ(Jobs()[cpu]["req"]["gpus"].get<int>(), 0);
  EXPECT_EQ(allocations(cpu).at(0)["gpus"], "") << allocations(cpu).dump();

  const int64_t pinned = Submit("-G 1 -w node3 -- true");
  const int64_t avoid = Submit("-G 1 -x node[1-2] -- true");
  const int64_t feature = Submit("-G 1 -C ib -- true");
  const int64_t gang = Submit("-N 2 --gres=gpu:1 -w node1 -x node2 -- true");
  for (int64_t id : {pinned, avoid, feature, gang}) {
    ASSERT_TRUE(WaitState(id, "COMPLETED", 20)) << id << ": " << StateOf(id);
  }
  EXPECT_EQ(node_of(pinned), "node3");
  EXPECT_EQ(node_of(avoid), "node3");
  EXPECT_EQ(node_of(feature), "node2");
  std::set<std::string> gang_nodes;
  for (const json& a : allocations(gang)) gang_nodes.insert(a["node"]);
  EXPECT_EQ(gang_nodes, (std::set<std::string>{"node1", "node3"}));

  testing::CmdResult r = Hachi("submit -G 1 -C 'ib&nvme' -- true");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("Requested node configuration is not available"),
            std::string::npos)
      << r.out;
  r = Hachi("submit -G 1 -w gpu07 -- true");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("Invalid node name specified"), std::string::npos) << r.out;

  const int64_t later = Submit("--begin=now+1hour -- true");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(StateOf(later), "PENDING");
  testing::CmdResult show = Hachi("show job " + std::to_string(later));
  EXPECT_NE(show.out.find("--begin"), std::string::npos) << show.out;
}

// The server killed with SIGKILL mid-run and restarted on the same state: every job it
// acknowledged is still there, and none ran twice (each job appends one line per run).
TEST_F(DevE2e, ServerKilledAndRestartedLosesNothing) {
  auto dev = std::make_unique<DevCluster>(dir_);
  ASSERT_FALSE(dev->url().empty());
  const std::string runs = dir_ + "/runs";
  ::mkdir(runs.c_str(), 0755);
  std::vector<int64_t> ids;
  for (int i = 0; i < 30; ++i) {
    ids.push_back(
        Submit("-G 4 -- sh -c 'echo run >> " + runs + "/$HACHI_JOB_ID; sleep 0.3'"));
  }
  // A long job, running when the server and its agents die: it lives on (its own
  // session, under its job waiter), the restarted agent adopts it, and when it ends its
  // exit is reported as if nothing had happened.
  const std::string long_pid = dir_ + "/long.pid", go = dir_ + "/go";
  const int64_t long_id =
      Submit("-G 8 -t 5:00 -- sh -c 'echo $$ > " + long_pid + "; while [ ! -e " + go +
             " ]; do sleep 0.1; done; echo run >> " + runs + "/long; exit 3'");
  pid_t job = 0;
  for (int i = 0; i < 200 && job == 0; ++i) {
    job = std::atoi(ReadFile(long_pid).c_str());
    if (job == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(job, 0) << "job " << long_id << " never started";
  dev->Kill9();
  dev.reset();
  EXPECT_EQ(::kill(job, 0), 0) << "the job outlives its agent";
  DevCluster again(dir_);
  ASSERT_FALSE(again.url().empty());
  EXPECT_NE(ReadFile(dir_ + "/dev.log").find("run(s) an earlier agent left running"),
            std::string::npos)
      << ReadFile(dir_ + "/dev.log");
  EXPECT_NE(ReadFile(dir_ + "/dev.log").find("adopted"), std::string::npos)
      << ReadFile(dir_ + "/dev.log");
  // Still running, on the same process, a while after the restarted agents registered.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(::kill(job, 0), 0) << "the restarted agent stopped the job it should adopt";
  EXPECT_EQ(StateOf(long_id), "RUNNING");
  { std::ofstream touch(go); }
  ASSERT_TRUE(WaitIdle(120));
  EXPECT_EQ(Jobs()[long_id]["state"], "FAILED") << Jobs()[long_id].dump();
  EXPECT_EQ(Jobs()[long_id]["exit_code"], 3) << Jobs()[long_id].dump();
  EXPECT_EQ(ReadFile(runs + "/long"), "run\n") << "the adopted job ran once";
  std::map<int64_t, json> jobs = Jobs();
  int completed = 0;
  for (int64_t id : ids) {
    ASSERT_TRUE(jobs.count(id)) << "job " << id << " was acknowledged and is gone";
    const std::string s = jobs[id]["state"].get<std::string>();
    // Jobs running when the server died were adopted and completed; one the server had
    // started but not yet handed to its agent lost it (NODE_FAIL).
    EXPECT_TRUE(s == "COMPLETED" || s == "NODE_FAIL") << id << " " << s;
    completed += s == "COMPLETED";
    const std::string lines = ReadFile(runs + "/" + std::to_string(id));
    EXPECT_LE(std::count(lines.begin(), lines.end(), '\n'), 1)
        << "job " << id << " ran twice";
  }
  EXPECT_GT(completed, 0);
  // New ids continue after the old ones.
  EXPECT_GT(Submit("-G 1 -- true"), ids.back());
}

// Fault injection: the server (with its agents) killed with SIGKILL at random moments of
// a busy run — while a client submits in a loop and jobs start and end — and restarted,
// six times. Afterwards: every acknowledged job is there and ended; a job without
// --requeue ran at most once, one with --requeue at most once per requeue + 1; no id was
// given twice.
TEST_F(DevE2e, KilledAtRandomMomentsLosesNothingAndRunsNothingTwice) {
  const std::string runs = dir_ + "/runs";
  ::mkdir(runs.c_str(), 0755);
  std::vector<int64_t> acked;
  std::mt19937 rng(20261130);
  auto dev = std::make_unique<DevCluster>(dir_);
  ASSERT_FALSE(dev->url().empty());
  for (int round = 0; round < 6; ++round) {
    std::atomic<bool> stop{false};
    std::vector<int64_t> got;
    std::thread client([&] {
      for (int i = 0; !stop; ++i) {
        const std::string requeue = i % 2 ? "--requeue " : "";
        const testing::CmdResult r =
            Hachi("submit --parsable -G " + std::to_string(1 << (i % 4)) + " " + requeue +
                      "-- sh -c 'echo run >> " + runs + "/$HACHI_JOB_ID; sleep 0.2'",
                  false);
        if (r.exit_code == 0) got.push_back(std::atoll(r.out.c_str()));  // acknowledged
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
    dev->Kill9();
    stop = true;
    client.join();
    acked.insert(acked.end(), got.begin(), got.end());
    dev->Start("");
    ASSERT_FALSE(dev->url().empty()) << "round " << round;
  }
  ASSERT_TRUE(WaitIdle(120));
  std::map<int64_t, json> jobs = Jobs();
  std::set<int64_t> unique(acked.begin(), acked.end());
  EXPECT_EQ(unique.size(), acked.size()) << "an id was given twice";
  ASSERT_GT(acked.size(), 10u);
  int completed = 0;
  for (int64_t id : acked) {
    ASSERT_TRUE(jobs.count(id)) << "job " << id << " was acknowledged and is gone";
    const json& j = jobs[id];
    const std::string s = j["state"].get<std::string>();
    EXPECT_TRUE(s == "COMPLETED" || s == "NODE_FAIL") << id << " " << j.dump();
    completed += s == "COMPLETED";
    const std::string lines = ReadFile(runs + "/" + std::to_string(id));
    const long ran = std::count(lines.begin(), lines.end(), '\n');
    const bool requeue = j["spec"]["requeue"].get<bool>();
    EXPECT_LE(ran, requeue ? j["requeues"].get<long>() + 1 : 1)
        << "job " << id << " ran " << ran << " times: " << j.dump();
  }
  EXPECT_GT(completed, 0);
}

TEST_F(DevE2e, MultiNodeJobGetsConsistentTorchrunEnvironment) {
  DevCluster dev(dir_, "--nodes 2");
  ASSERT_FALSE(dev.url().empty());
  const int64_t id = Submit("-N 2 --gres=gpu:8 -o " + dir_ + "/%j-%N.out -- sh -c " +
                            "'echo $MASTER_ADDR $MASTER_PORT $WORLD_SIZE $NODE_RANK "
                            "$NPROC_PER_NODE $HACHI_NODELIST'");
  ASSERT_TRUE(WaitState(id, "COMPLETED", 20)) << StateOf(id);
  std::set<std::string> masters, ranks;
  for (const char* node : {"node1", "node2"}) {
    std::istringstream in(
        ReadFile(dir_ + "/" + std::to_string(id) + "-" + node + ".out"));
    std::string addr, port, world, rank, nproc, nodelist;
    in >> addr >> port >> world >> rank >> nproc >> nodelist;
    masters.insert(addr + ":" + port);
    ranks.insert(rank);
    EXPECT_EQ(world, "16");
    EXPECT_EQ(nproc, "8");
    EXPECT_EQ(nodelist, "node1,node2");
  }
  EXPECT_EQ(masters.size(), 1u);
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"}));
}

// A GPU that falls off the bus, through the real NVML event path: `hachi dev` on "real"
// GPUs served by the fake libnvidia-ml.so.1 (an HGX H100), a fault injected into it. The
// agent's monitor reports it, the server takes that GPU out of service and requeues the
// job on it, which runs again on other GPUs; `show node` says why; `resume --gpu` puts
// the GPU back.
TEST_F(DevE2e, GpuFallenOffTheBusIsDrainedAndItsJobRequeued) {
  const std::string events = dir_ + "/nvml-events";
  std::string node;
  std::unique_ptr<DevCluster> dev = StartOnFakeNvml(events, &node);
  ASSERT_TRUE(dev != nullptr && !node.empty()) << ReadFile(dir_ + "/dev.log");

  const int64_t id = Submit("-G 2 -t 5:00 -o " + dir_ + "/%j.out -- sleep 60");
  ASSERT_TRUE(WaitState(id, "RUNNING", 10));
  const std::string first = Jobs()[id]["allocations"][0]["gpus"].get<std::string>();
  const int bad = std::stoi(first);  // "0-1" or "4,6": its first GPU
  {
    std::ofstream e(events, std::ios::app);
    e << "xid " << bad << " 79\n";
  }
  json again;
  for (int i = 0; i < 100; ++i) {
    again = Jobs()[id];
    if (again["requeues"] == 1 && again["state"] == "RUNNING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(again["requeues"], 1) << again.dump() << "\n" << ReadFile(dir_ + "/dev.log");
  ASSERT_EQ(again["state"], "RUNNING") << again.dump();
  EXPECT_EQ(again["reason"], "GPU " + std::to_string(bad) + " of node " + node +
                                 ": Xid 79: GPU has fallen off the bus");
  const std::string now = again["allocations"][0]["gpus"].get<std::string>();
  EXPECT_EQ(now.find(std::to_string(bad)), std::string::npos)
      << now << " holds the bad GPU";

  const std::string shown = Hachi("show node " + node).out;
  EXPECT_NE(shown.find("gpu" + std::to_string(bad) + " unhealthy: Xid 79"),
            std::string::npos)
      << shown;
  EXPECT_EQ(Hachi("resume " + node + " --gpu " + std::to_string(bad), false).exit_code,
            0);
  EXPECT_EQ(Hachi("show node " + node).out.find("unhealthy:"), std::string::npos);
  EXPECT_EQ(Hachi("cancel " + std::to_string(id), false).exit_code, 0);
  ASSERT_TRUE(WaitState(id, "CANCELLED", 20));
}

// Users who pin GPUs by hand: NVML lists every compute process per GPU (the fake's
// "proc" lines); the agent finds each one's job (cgroup or HACHI_JOB_ID) and the server
// reports on `show node` the processes on GPUs no job of theirs was given: a job's own
// process on its own GPU is not reported, one on a GPU outside its allocation is, and so
// is a process Hachi did not start. When they leave the GPUs, the report goes.
TEST_F(DevE2e, ProcessesOnGpusNoJobWasGivenAreReported) {
  const std::string events = dir_ + "/nvml-events";
  std::string node;
  std::unique_ptr<DevCluster> dev = StartOnFakeNvml(events, &node);
  ASSERT_TRUE(dev != nullptr && !node.empty()) << ReadFile(dir_ + "/dev.log");
  const std::string pidfile = dir_ + "/job.pid";
  const int64_t id =
      Submit("-G 2 -t 5:00 -- sh -c 'echo $$ > " + pidfile + "; sleep 60'");
  ASSERT_TRUE(WaitState(id, "RUNNING", 10));
  const GpuSet given =
      *GpuSet::Parse(Jobs()[id]["allocations"][0]["gpus"].get<std::string>());
  int job_pid = 0;
  for (int i = 0; i < 100 && job_pid == 0; ++i) {
    job_pid = std::atoi(ReadFile(pidfile).c_str());
    if (job_pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(job_pid, 0);
  int other = 0;
  while (given.contains(other)) ++other;
  // A process somebody started by hand, outside Hachi.
  const pid_t by_hand = ::fork();
  if (by_hand == 0) {
    ::execl("/bin/sleep", "sleep", "60", nullptr);
    ::_exit(127);
  }
  {
    std::ofstream e(events, std::ios::app);
    e << "proc " << given.First() << " " << job_pid << " 30000\n"
      << "proc " << other << " " << job_pid << " 1000\n"
      << "proc 7 " << by_hand << " 20480\n";
  }
  std::string shown;
  for (int i = 0; i < 150; ++i) {  // the agent polls NVML every 5 s
    shown = Hachi("show node " + node).out;
    if (shown.find("stray process") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(shown.find("gpu" + std::to_string(other) + " stray process: pid " +
                       std::to_string(job_pid)),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("of job " + std::to_string(id) + ", which was not given this GPU"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("gpu7 stray process: pid " + std::to_string(by_hand) +
                       " (root: sleep 60) 20480 MiB, not started by Hachi"),
            std::string::npos)
      << shown;
  EXPECT_EQ(shown.find("gpu" + std::to_string(given.First()) + " stray"),
            std::string::npos)
      << "the job's own process on its own GPU is no stray:\n"
      << shown;
  {
    std::ofstream e(events, std::ios::app);
    e << "noproc " << other << " " << job_pid << "\nnoproc 7 " << by_hand << "\n";
  }
  for (int i = 0; i < 150; ++i) {
    shown = Hachi("show node " + node).out;
    if (shown.find("stray process") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(shown.find("stray process"), std::string::npos) << shown;
  ::kill(by_hand, SIGKILL);
  ::waitpid(by_hand, nullptr, 0);
  EXPECT_EQ(Hachi("cancel " + std::to_string(id), false).exit_code, 0);
  ASSERT_TRUE(WaitState(id, "CANCELLED", 20));
}

// What the server keeps is not for other local users : under the usual
// umask 022 the state directory is 0711 (users pass through it to the socket), the
// database and its -wal and -shm 0600 from the first start, the lock and the spool
// private too; at a later start what was widened meanwhile is narrowed and said, and a
// database someone else owns is refused.
TEST_F(DevE2e, StateFilesArePrivateFromTheFirstStart) {
  const mode_t old_mask = ::umask(022);
  const std::string state = dir_ + "/state", db = state + "/hachi.db";
  auto mode = [](const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
  };
  {
    DevCluster dev(dir_);
    ASSERT_FALSE(dev.url().empty()) << ReadFile(dir_ + "/dev.log");
    ASSERT_EQ(Hachi("run -G 1 -o /dev/null -- true").exit_code, 0);
    EXPECT_EQ(mode(state), 0711);
    for (const std::string& f :
         {db, db + "-wal", db + "-shm", state + "/lock", state + "/cluster-secret"}) {
      EXPECT_EQ(mode(f), 0600) << f;
    }
    EXPECT_EQ(mode(state + "/spool/node1"), 0711);
  }
  ASSERT_EQ(::chmod(state.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(db.c_str(), 0644), 0);
  ASSERT_EQ(::chmod((state + "/lock").c_str(), 0666), 0);
  ASSERT_EQ(::chmod((state + "/spool/node1").c_str(), 0777), 0);
  {
    DevCluster dev(dir_);
    ASSERT_FALSE(dev.url().empty()) << ReadFile(dir_ + "/dev.log");
    const std::string log = ReadFile(dir_ + "/dev.log");
    EXPECT_NE(log.find(db + " was mode 0644, wider than 0600: made it 0600"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find(state + " was mode 0755, wider than 0711: made it 0711"),
              std::string::npos)
        << log;
    EXPECT_EQ(mode(state), 0711);
    EXPECT_EQ(mode(db), 0600);
    EXPECT_EQ(mode(state + "/lock"), 0600);
    EXPECT_EQ(mode(state + "/spool/node1"), 0711);
  }
  ::umask(old_mask);
  if (::geteuid() != 0) GTEST_SKIP() << "giving the database to another uid needs root";
  ASSERT_EQ(::chown(db.c_str(), 65534, 65534), 0);
  DevCluster dev(dir_);
  EXPECT_TRUE(dev.url().empty());
  const std::string log = ReadFile(dir_ + "/dev.log");
  EXPECT_NE(log.find(db + " belongs to uid 65534"), std::string::npos) << log;
  ASSERT_EQ(::chown(db.c_str(), 0, 0), 0);
}

// Bytes that are not UTF-8 used to become U+FFFD on the way, so a job
// submitted from `d\xff` ran in `d\xef\xbf\xbd` (a directory another user may create).
// The working directory, an environment value and an argument reach the job byte for
// byte, through the CLI, the API, the store and the agent's launch.
TEST_F(DevE2e, NonUtf8WorkdirEnvironmentAndArgvReachTheJobExactly) {
  DevCluster dev(dir_);
  ASSERT_FALSE(dev.url().empty());
  const std::string odd = dir_ + "/d\xff";
  const std::string replaced = dir_ + "/d\xef\xbf\xbd";  // what the old codec made of it
  ASSERT_EQ(::mkdir(odd.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(replaced.c_str(), 0755), 0);
  ASSERT_EQ(::chdir(odd.c_str()), 0);
  ::setenv("ISSUE16_BYTES",
           "v\xff\xfe"
           "1",
           1);
  const int64_t id = Submit("-G 1 -o " + dir_ + "/job.out -- sh -c 'pwd -P > " + dir_ +
                            "/pwd.out; printf %s \"$ISSUE16_BYTES\" > " + dir_ +
                            "/env.out; printf %s \"$0\" > " + dir_ + "/arg.out' 'a\xff'");
  ::unsetenv("ISSUE16_BYTES");
  ASSERT_EQ(::chdir(dir_.c_str()), 0);
  ASSERT_TRUE(WaitState(id, "COMPLETED", 20)) << StateOf(id) << "\n"
                                              << ReadFile(dir_ + "/job.out");
  EXPECT_EQ(ReadFile(dir_ + "/pwd.out"), odd + "\n");
  EXPECT_EQ(ReadFile(dir_ + "/env.out"),
            "v\xff\xfe"
            "1");
  EXPECT_EQ(ReadFile(dir_ + "/arg.out"), "a\xff");
  // The API shows such a value in its bytes form; UTF-8 values stay strings.
  json job = Jobs()[id];
  ASSERT_TRUE(job["spec"]["workdir"].is_object()) << job.dump();
  EXPECT_EQ(Base64Decode(job["spec"]["workdir"]["base64"].get<std::string>()), odd);
  EXPECT_EQ(job["spec"]["argv"][0], "sh");
}

// `hachi cancel A` cancels the whole array (it cancelled the first
// task only), `hachi cancel A_T` task T alone, as Slurm's scancel.
TEST_F(DevE2e, CancelOfAnArraysIdCancelsTheArray) {
  DevCluster dev(dir_);
  ASSERT_FALSE(dev.url().empty());
  // The tasks wait on a held job, so that released ones stay pending too.
  const int64_t blocker = Submit("-H -G 1 -o /dev/null -- true");
  const int64_t a =
      Submit("-H --array=0-3 -G 1 -o /dev/null -d afterok:" + std::to_string(blocker) +
             " -- true");
  ASSERT_GT(a, 0);
  const std::string id = std::to_string(a);
  EXPECT_EQ(Hachi("cancel " + id + "_2").exit_code, 0);
  EXPECT_EQ(StateOf(a + 2), "CANCELLED");
  EXPECT_EQ(StateOf(a), "PENDING");
  EXPECT_EQ(Hachi("release " + id + "_[0-1]").exit_code, 0);
  EXPECT_FALSE(Jobs()[a]["held"].get<bool>());
  EXPECT_TRUE(Jobs()[a + 3]["held"].get<bool>());
  EXPECT_EQ(Hachi("hold " + id).exit_code, 0);
  EXPECT_TRUE(Jobs()[a]["held"].get<bool>());
  EXPECT_EQ(Hachi("cancel " + id).exit_code, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(StateOf(a + i), "CANCELLED") << i;
  const testing::CmdResult r = Hachi("cancel " + id + "_9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("has no task 9"), std::string::npos) << r.out;
  EXPECT_NE(Hachi("cancel 1_x").exit_code, 0);
  EXPECT_EQ(Hachi("cancel " + std::to_string(blocker)).exit_code, 0);
}

// A Unix-socket proxy in front of the server that loses the reply of the first
// request: it forwards the request, waits until the server answers (so the submit was
// made), then closes the client's connection without a word. Later connections pass.
class ReplyLosingProxy {
 public:
  ReplyLosingProxy(std::string listen, std::string server)
      : listen_(std::move(listen)), server_(std::move(server)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a = Address(listen_);
    ::unlink(listen_.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
          ::listen(fd_, 8) == 0;
    if (ok_) thread_ = std::thread([this] { Serve(); });
  }
  ~ReplyLosingProxy() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    ::unlink(listen_.c_str());
  }
  bool ok() const { return ok_; }
  int lost() const { return lost_; }

 private:
  static sockaddr_un Address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    return a;
  }
  static bool Readable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) > 0;
  }
  void Serve() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!stop_ && std::chrono::steady_clock::now() < end) {
      if (!Readable(fd_, 100)) continue;
      const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un a = Address(server_);
      if (server >= 0 &&
          ::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        Pump(client, server, /*lose_reply=*/lost_ == 0);
      }
      if (server >= 0) ::close(server);
      ::close(client);
    }
  }
  // Copies both ways for at most 10 s. With lose_reply: once the server has answered,
  // both ends are closed, the reply unsent.
  void Pump(int client, int server, bool lose_reply) {
    char buf[65536];
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!stop_ && std::chrono::steady_clock::now() < end) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 100) <= 0) continue;
      for (int k = 0; k < 2; ++k) {
        if ((p[k].revents & (POLLIN | POLLHUP)) == 0) continue;
        const ssize_t n = ::read(p[k].fd, buf, sizeof buf);
        if (n <= 0) return;
        if (k == 1 && lose_reply) {
          ++lost_;
          return;
        }
        if (::write(p[1 - k].fd, buf, static_cast<size_t>(n)) != n) return;
      }
    }
  }

  std::string listen_, server_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int> lost_{0};
  std::thread thread_;
};

// A submit whose reply was lost printed "cannot reach the server",
// and submitting again made a second job. The CLI now sends the same submit again with
// its idempotency key, and the server answers with the first one's job: one job.
TEST_F(DevE2e, ASubmitWhoseReplyWasLostMakesOneJob) {
  DevCluster dev(dir_);
  ASSERT_FALSE(dev.url().empty());
  ReplyLosingProxy proxy(dir_ + "/proxy.sock", dir_ + "/state/hachi.sock");
  ASSERT_TRUE(proxy.ok());
  const std::string real = std::getenv("HACHI_SERVER");
  ::setenv("HACHI_SERVER", ("unix:" + dir_ + "/proxy.sock").c_str(), 1);
  const testing::CmdResult r =
      Hachi("submit --parsable -H -G 1 -o /dev/null -- true", false);
  ::setenv("HACHI_SERVER", real.c_str(), 1);
  EXPECT_EQ(proxy.lost(), 1) << "the first reply was lost";
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const int64_t id = std::atoll(r.out.c_str());
  std::map<int64_t, json> jobs = Jobs();
  EXPECT_EQ(jobs.size(), 1u) << "one job, not a duplicate";
  EXPECT_EQ(jobs.count(id), 1u) << r.out;
  EXPECT_EQ(Hachi("cancel " + std::to_string(id)).exit_code, 0);
}

// The job runtime: --signal=B:USR1@TIME reaches the batch shell TIME before its
// limit (here 1 s before a 3 s limit), a requeued job runs again with its id and sees
// SLURM_RESTART_COUNT=1, POST /signal reaches it, and an output directory that does not
// exist yet (submitit makes it after sbatch returns) is made at launch.
TEST_F(DevE2e, SignalBeforeTheLimitRequeueAndOutputDirectories) {
  DevCluster dev(dir_);
  ASSERT_FALSE(dev.url().empty());
  Result<std::unique_ptr<api::HttpClient>> http =
      api::HttpClient::Create("unix:" + dir_ + "/state/hachi.sock");
  ASSERT_TRUE(http.ok()) << http.status().ToString();

  const std::string warned = dir_ + "/warned.sh";
  std::ofstream(warned) << "#!/bin/sh\n"
                           "#SBATCH --signal=B:USR1@1\n"
                           "#SBATCH -t 0:03\n"
                           "trap 'echo checkpoint > " +
                               dir_ + "/trapped; exit 0' USR1\n" +
                               "while :; do sleep 0.1; done\n";
  const int64_t w = Submit("-G 1 " + warned);
  EXPECT_TRUE(WaitState(w, "COMPLETED", 20)) << StateOf(w) << " (TIMEOUT: no signal)";
  EXPECT_EQ(ReadFile(dir_ + "/trapped"), "checkpoint\n");

  const std::string again = dir_ + "/again.sh";
  std::ofstream(again) << "#!/bin/sh\n"
                          "trap 'echo usr2 >> " +
                              dir_ + "/signals' USR2\n" +
                              "echo \"${SLURM_RESTART_COUNT:-none}\" >> " + dir_ +
                              "/runs\n" + "while :; do sleep 0.1; done\n";
  const int64_t r = Submit("-G 1 " + again);
  const std::string job = "/api/v1/jobs/" + std::to_string(r);
  ASSERT_TRUE(WaitState(r, "RUNNING", 20));
  for (int i = 0; i < 100 && ReadFile(dir_ + "/runs").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ReadFile(dir_ + "/runs"), "none\n");
  Result<std::string> sent =
      (*http)->Call("POST", job + "/signal", R"({"signal":"USR2","batch_only":true})");
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  for (int i = 0; i < 100 && ReadFile(dir_ + "/signals").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ReadFile(dir_ + "/signals"), "usr2\n");
  Result<std::string> bad =
      (*http)->Call("POST", job + "/signal", R"({"signal":"USR9"})");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*http)->Call("POST", job + "/requeue").ok());
  for (int i = 0; i < 200 && ReadFile(dir_ + "/runs") != "none\n1\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ReadFile(dir_ + "/runs"), "none\n1\n") << "the requeued run, same id";
  EXPECT_EQ(Jobs()[r]["requeues"], 1);
  EXPECT_EQ(Hachi("cancel " + std::to_string(r)).exit_code, 0);
  ASSERT_TRUE(WaitState(r, "CANCELLED", 20));
  Result<std::string> ended = (*http)->Call("POST", job + "/signal", R"({"signal":10})");
  // An ended job: the cancel's refusal (400), which scancel --signal tells apart.
  EXPECT_EQ(ended.status().code(), StatusCode::kInvalidArgument)
      << ended.status().ToString();
  EXPECT_NE(ended.status().message().find("already ended (CANCELLED)"), std::string::npos)
      << ended.status().ToString();

  // Nothing creates logs/ before the job starts.
  const int64_t o = Submit("-G 1 -o " + dir_ + "/logs/%j/%j_0_log.out -- echo made");
  ASSERT_TRUE(WaitState(o, "COMPLETED", 20)) << StateOf(o);
  const std::string id = std::to_string(o);
  EXPECT_EQ(ReadFile(dir_ + "/logs/" + id + "/" + id + "_0_log.out"), "made\n");
}

}  // namespace
}  // namespace hachi::cli
