// GPU shares that isolate (docs/isolation.md "GPU shares"), end to end through
// `hachi dev`:
//   - with MPS (a fake nvidia-cuda-mps-control that logs what it is told): the agent
//     starts one control daemon for the shared GPU before the first share, each share's
//     job finds it through CUDA_MPS_PIPE_DIRECTORY with its limits, and the daemon is
//     told to quit after the last share; `show node` says MPS serves the shares.
//   - without MPS, on "real" GPUs (the fake NVML, whose per-process memory the test
//     scripts): a share whose process uses more GPU memory than promised ends
//     OUT_OF_MEMORY with the figures, its neighbour on the same GPU runs on, and
//     `show job` gives each job's peak against its promise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "cli/dev_testing.h"
#include "cli/e2e_testing.h"
#include "core/strings.h"
#include "core/testing/paths.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::cli {
namespace {

using nlohmann::json;

constexpr const char* kSharedPartition =
    "[[partition]]\nname = \"shared\"\nnodes = \"all\"\nmode = \"shared\"\n"
    "allow_gpu_sharing = true\n";

class GpuShareE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-share-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  int64_t Submit(const std::string& args) {
    const testing::CmdResult r = Hachi("submit --parsable -p shared " + args, false);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return std::atoll(r.out.c_str());
  }
  std::string dir_;
};

TEST_F(GpuShareE2e, AnMpsDaemonServesTheGpusSharesFromFirstToLast) {
  const std::string config = dir_ + "/cluster.toml";
  std::ofstream(config) << kSharedPartition;
  DevCluster dev(dir_, "--nodes 1 --config " + config + " --mps on --mps-control " +
                           FakeMpsControl());
  ASSERT_FALSE(dev.url().empty()) << ReadFile(dir_ + "/dev.log");
  // Two halves of one GPU, one user; each prints what MPS needs, then waits for its
  // release file.
  const std::string out = dir_ + "/out-%j";
  const std::string wait =
      "for i in $(seq 300); do [ -e " + dir_ + "/go ] && break; sleep 0.1; done";
  const std::string env =
      "echo pipe=$CUDA_MPS_PIPE_DIRECTORY dev=$CUDA_VISIBLE_DEVICES "
      "pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE mem=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; ";
  const int64_t a =
      Submit("--gpu-share 0.5 --gpu-mem 20G -o " + out + " --wrap '" + env + wait + "'");
  const int64_t b =
      Submit("--gpu-share 0.5 --gpu-mem 20G -o " + out + " --wrap '" + env + wait + "'");
  ASSERT_TRUE(WaitUntil(
      30, [&] { return ShownState(a) == "RUNNING" && ShownState(b) == "RUNNING"; }))
      << ShownState(a) << " " << ShownState(b) << ReadFile(dir_ + "/dev.log");
  const json ja = ShownJob(a);
  const json jb = ShownJob(b);
  ASSERT_EQ(ja["allocations"][0]["gpus"], jb["allocations"][0]["gpus"]);  // one GPU
  const std::string gpu = ja["allocations"][0]["gpus"];
  const std::string mps = dir_ + "/state/spool/node1/mps/gpu" + gpu;
  const std::string log = mps + "/log/control.log";
  ASSERT_TRUE(WaitUntil(10, [&] {
    return ReadFile(dir_ + "/out-" + std::to_string(a)).find("pipe=") !=
               std::string::npos &&
           ReadFile(dir_ + "/out-" + std::to_string(b)).find("pipe=") !=
               std::string::npos;
  }));
  // Each share goes through that GPU's daemon, with its limits, and names the GPU by
  // the UUID its daemon was given (MPS renumbers indices, not UUIDs).
  const std::string text_a = ReadFile(dir_ + "/out-" + std::to_string(a));
  const size_t at = text_a.find(" dev=GPU-");
  ASSERT_NE(at, std::string::npos) << text_a;
  const std::string uuid = text_a.substr(at + 5, text_a.find(' ', at + 5) - (at + 5));
  const std::string want = "pipe=" + mps + "/pipe dev=" + uuid + " pct=50 mem=0=20480M";
  EXPECT_NE(text_a.find(want), std::string::npos) << text_a;
  EXPECT_NE(ReadFile(dir_ + "/out-" + std::to_string(b)).find(want), std::string::npos);
  // One daemon for the GPU, started once, seeing that GPU alone.
  const std::string started = ReadFile(log);
  EXPECT_NE(started.find("on device " + uuid + "\n"), std::string::npos) << started;
  EXPECT_EQ(started.find("Starting"), started.rfind("Starting")) << started;
  const std::string shown = Hachi("show node node1").out;
  EXPECT_NE(shown.find("GPU shares: MPS"), std::string::npos) << shown;

  std::ofstream(dir_ + "/go") << "";
  ASSERT_TRUE(WaitUntil(
      30, [&] { return ShownState(a) == "COMPLETED" && ShownState(b) == "COMPLETED"; }));
  // After the last share: told to quit, and gone.
  EXPECT_TRUE(WaitUntil(10, [&] {
    return ReadFile(log).find("User did send quit") != std::string::npos &&
           ReadFile(log).find("Exit") != std::string::npos;
  })) << ReadFile(log);
}

TEST_F(GpuShareE2e, WithoutMpsAShareOverItsGpuMemoryEndsAndItsNeighbourRunsOn) {
  const std::string config = dir_ + "/cluster.toml";
  std::ofstream(config) << kSharedPartition << "[burn_in]\nchecks = []\n";
  const std::string topo_path = dir_ + "/topo.json";
  std::ofstream(topo_path) << topo::TopologyToJson(*topo::LoadPreset("hgx-h100"));
  const std::string events = dir_ + "/nvml-events";
  ::setenv("HACHI_NVML_LIBRARY", FakeNvmlLibrary().c_str(), 1);
  ::setenv("HACHI_FAKE_NVML_TOPOLOGY", topo_path.c_str(), 1);
  ::setenv("HACHI_FAKE_NVML_EVENTS", events.c_str(), 1);
  DevCluster dev(dir_, "--config " + config + " --mps off");
  ::unsetenv("HACHI_NVML_LIBRARY");
  ::unsetenv("HACHI_FAKE_NVML_TOPOLOGY");
  ::unsetenv("HACHI_FAKE_NVML_EVENTS");
  ASSERT_FALSE(dev.url().empty()) << ReadFile(dir_ + "/dev.log");
  std::string node;
  ASSERT_TRUE(WaitUntil(10, [&] {
    const json n = json::parse(Hachi("nodes --json", false).out, nullptr, false);
    if (!n.contains("nodes") || n["nodes"].empty()) return false;
    node = n["nodes"][0]["name"];
    return n["nodes"][0]["state"] == "up";
  }));
  // Each share writes its pid, then runs until told; NVML "sees" its memory use.
  auto script = [&](const std::string& tag) {
    return "--wrap 'echo $$ > " + dir_ + "/pid-" + tag +
           "; for i in $(seq 600); do [ -e " + dir_ + "/go ] && break; sleep 0.1; done'";
  };
  const int64_t a = Submit("--gpu-share 0.5 --gpu-mem 20G -o /dev/null " + script("a"));
  const int64_t b = Submit("--gpu-share 0.5 --gpu-mem 20G -o /dev/null " + script("b"));
  ASSERT_TRUE(WaitUntil(30, [&] {
    return ShownState(a) == "RUNNING" && ShownState(b) == "RUNNING";
  })) << ReadFile(dir_ + "/dev.log");
  const std::string gpu = ShownJob(a)["allocations"][0]["gpus"];
  ASSERT_EQ(ShownJob(b)["allocations"][0]["gpus"], gpu);
  ASSERT_TRUE(WaitUntil(10, [&] {
    return !ReadFile(dir_ + "/pid-a").empty() && !ReadFile(dir_ + "/pid-b").empty();
  }));
  const std::string pid_a = std::string(Trim(ReadFile(dir_ + "/pid-a")));
  const std::string pid_b = std::string(Trim(ReadFile(dir_ + "/pid-b")));
  // Job a grows past its 20 GiB (23.1 GiB); job b stays at 11 GiB.
  std::ofstream(events, std::ios::app) << "proc " << gpu << " " << pid_a << " 12000\n"
                                       << "proc " << gpu << " " << pid_b << " 11264\n";
  ASSERT_TRUE(WaitUntil(20, [&] {
    return ShownJob(b).value("gpu_memory_peak_mib", 0) == 11264;
  })) << ShownJob(b).dump();
  std::ofstream(events, std::ios::app) << "proc " << gpu << " " << pid_a << " 23654\n";
  ASSERT_TRUE(WaitUntil(30, [&] { return ShownState(a) == "OUT_OF_MEMORY"; }))
      << ShownState(a) << ReadFile(dir_ + "/dev.log");
  const json ended = ShownJob(a);
  EXPECT_EQ(ended["reason"], "used 23.1 GiB of GPU memory on GPU " + gpu +
                                 ", promised 20 GiB (--gpu-mem)");
  EXPECT_EQ(ended["gpu_memory_peak_mib"], 23654);
  // The neighbour is untouched.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(ShownState(b), "RUNNING");
  const std::string shown = Hachi("show job " + std::to_string(b)).out;
  EXPECT_NE(shown.find("GpuMemPeak=11.0G GpuMemPromised=20.0G"), std::string::npos)
      << shown;
  const std::string node_text = Hachi("show node " + node).out;
  EXPECT_NE(node_text.find("GPU shares: no MPS (off (--mps off))"), std::string::npos)
      << node_text;
  std::ofstream(dir_ + "/go") << "";
  EXPECT_TRUE(WaitUntil(30, [&] { return ShownState(b) == "COMPLETED"; }))
      << ShownState(b);
}

}  // namespace
}  // namespace hachi::cli
