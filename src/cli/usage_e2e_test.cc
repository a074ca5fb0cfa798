// What jobs do with their GPUs (docs/efficiency.md), end to end through
// `hachi dev` on the fake NVML: the test scripts each GPU's utilisation (GPU 3 at 5 %,
// GPU 5 never used, the other six at 95 %); the agent samples the running job every
// 0.2 s, the server sums its run, and `hachi eff` (and seff, the same binary by Slurm's
// name) flags the imbalance and the idle GPU with the numbers. The run's figures are
// stored: after the job ends and after a restart of the server, they are the same.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "cli/dev_testing.h"
#include "cli/e2e_testing.h"
#include "core/testing/paths.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::cli {
namespace {

using nlohmann::json;

class UsageE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-usage-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::ofstream(dir_ + "/cluster.toml")
        << "[[partition]]\nname = \"gpu\"\nnodes = \"all\"\nmode = \"shared\"\n"
           "[burn_in]\nchecks = []\n";
    std::ofstream(dir_ + "/topo.json")
        << topo::TopologyToJson(*topo::LoadPreset("hgx-h100"));
    // GPU 3 starves (data loading), GPU 5 is never touched, the rest work.
    std::ofstream(dir_ + "/nvml-events")
        << "util 0 95\nutil 1 94\nutil 2 96\nutil 3 5\nutil 4 95\nutil 5 0\n"
           "util 6 95\nutil 7 95\nmemused 0 61000\npower 0 650\n";
  }
  void TearDown() override {
    if (!HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  // `hachi dev` on "real" GPUs: the fake NVML, sampling every 0.2 s.
  std::unique_ptr<DevCluster> StartDev() {
    ::setenv("HACHI_NVML_LIBRARY", FakeNvmlLibrary().c_str(), 1);
    ::setenv("HACHI_FAKE_NVML_TOPOLOGY", (dir_ + "/topo.json").c_str(), 1);
    ::setenv("HACHI_FAKE_NVML_EVENTS", (dir_ + "/nvml-events").c_str(), 1);
    auto dev = std::make_unique<DevCluster>(
        dir_, "--config " + dir_ + "/cluster.toml --usage-interval 0.2");
    ::unsetenv("HACHI_NVML_LIBRARY");
    ::unsetenv("HACHI_FAKE_NVML_TOPOLOGY");
    ::unsetenv("HACHI_FAKE_NVML_EVENTS");
    return dev;
  }
  static bool NodeUp() {
    const json n = json::parse(Hachi("nodes --json", false).out, nullptr, false);
    return n.contains("nodes") && !n["nodes"].empty() && n["nodes"][0]["state"] == "up";
  }
  static json Usage(int64_t id) {
    return json::parse(Hachi("eff " + std::to_string(id) + " --json", false).out, nullptr,
                       false);
  }
  std::string dir_;
};

TEST_F(UsageE2e, EffFlagsTheStarvedAndTheIdleGpuWithTheirNumbers) {
  std::unique_ptr<DevCluster> dev = StartDev();
  ASSERT_FALSE(dev->url().empty()) << ReadFile(dir_ + "/dev.log");
  ASSERT_TRUE(WaitUntil(20, NodeUp)) << Hachi("nodes").out << ReadFile(dir_ + "/dev.log");
  const testing::CmdResult sub = Hachi(
      "submit --parsable -p gpu --gpus 8 -o /dev/null --wrap 'for i in $(seq 600); "
      "do [ -e " +
          dir_ + "/go ] && break; sleep 0.1; done'",
      false);
  ASSERT_EQ(sub.exit_code, 0) << sub.out;
  const int64_t id = std::atoll(sub.out.c_str());
  // Ten samples of every GPU.
  ASSERT_TRUE(WaitUntil(60,
                        [&] {
                          const json u = Usage(id);
                          if (!u.contains("runs") || u["runs"].empty()) return false;
                          const json& gpus = u["runs"].back()["gpus"];
                          if (gpus.size() != 8) return false;
                          for (const json& g : gpus) {
                            if (g.value("samples", 0) < 10) return false;
                          }
                          return true;
                        }))
      << Usage(id).dump() << ReadFile(dir_ + "/dev.log");
  const json running = Usage(id);
  const json& gpus = running["runs"].back()["gpus"];
  EXPECT_EQ(gpus[3]["util_mean"], 5.0);
  EXPECT_EQ(gpus[3]["util_p95"], 5);
  EXPECT_EQ(gpus[5]["util_max"], 0);
  EXPECT_EQ(gpus[0]["mem_peak_mib"], 61000);
  EXPECT_EQ(gpus[0]["power_mean_w"], 650.0);
  const std::string text = Hachi("eff " + std::to_string(id)).out;
  EXPECT_NE(text.find("GPUs: 8,"), std::string::npos) << text;
  EXPECT_NE(text.find("idle-gpu: GPU 5 was never used (0 % in every sample) while the "
                      "other 7 worked: ask for 7 GPUs"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("imbalance: GPU 3 averaged 5 % while the other 6 averaged 95 %: "
                      "look at data loading or an uneven split of the work"),
            std::string::npos)
      << text;
  // seff: the same binary by Slurm's name.
  const std::string link = dir_ + "/seff";
  std::filesystem::create_symlink(BinaryDir() + "/hachi", link);
  const testing::CmdResult seff =
      testing::Shell(link + " " + std::to_string(id) + " 2>&1");
  EXPECT_EQ(seff.exit_code, 0) << seff.out;
  EXPECT_NE(seff.out.find("Job ID: " + std::to_string(id)), std::string::npos)
      << seff.out;
  EXPECT_NE(seff.out.find("imbalance: GPU 3"), std::string::npos) << seff.out;

  std::ofstream(dir_ + "/go") << "";
  ASSERT_TRUE(WaitUntil(30, [&] { return ShownState(id) == "COMPLETED"; }))
      << ShownState(id);
  const std::string shown = Hachi("show job " + std::to_string(id)).out;
  EXPECT_NE(shown.find("GpuUtil="), std::string::npos) << shown;
  EXPECT_NE(shown.find("IdleGpus=1"), std::string::npos) << shown;
  const json ended = Usage(id);
  ASSERT_EQ(ended["runs"].size(), 1u) << ended.dump();
  const json stored_gpus = ended["runs"][0]["gpus"];
  EXPECT_EQ(stored_gpus[3]["util_mean"], 5.0);

  // A restart of the server: the stored run, its series and findings, unchanged.
  dev.reset();
  dev = StartDev();
  ASSERT_FALSE(dev->url().empty()) << ReadFile(dir_ + "/dev.log");
  const json after = Usage(id);
  ASSERT_EQ(after["runs"].size(), 1u) << after.dump();
  EXPECT_EQ(after["runs"][0], ended["runs"][0]);
  EXPECT_EQ(after["findings"], ended["findings"]);
  EXPECT_FALSE(after["runs"][0]["gpus"][0]["series"].empty());
}

TEST_F(UsageE2e, BadIdsAndUnknownJobsAreClearErrors) {
  DevCluster dev(dir_);
  ASSERT_FALSE(dev.url().empty()) << ReadFile(dir_ + "/dev.log");
  const testing::CmdResult bad = Hachi("eff abc");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("'abc' is not a job id"), std::string::npos) << bad.out;
  const testing::CmdResult missing = Hachi("eff 4242");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.out.find("no job 4242"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace hachi::cli
