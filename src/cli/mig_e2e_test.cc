// MIG devices as devices of their own (docs/isolation.md "MIG devices"), end to
// end through `hachi dev` on the fake NVML: GPU 0 of an HGX H100 split into two 1g.10gb
// devices (`migdev`), the caps of each in a fake /proc tree (HACHI_MIG_CAPS_ROOT; the
// agent really makes each job's cgroup with its rules when it can). Two
// --gres=gpu:1g.10gb:1 jobs run, each seeing its own MIG-<uuid> in
// CUDA_VISIBLE_DEVICES; a third waits with the numbers; a whole-GPU job never lands on
// GPU 0; a profile no node has is refused at submit naming those that exist; `hachi
// nodes --gpus` and `show job` show the devices; when one ends the third starts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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

class MigE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-mig-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  int64_t Submit(const std::string& args) {
    const testing::CmdResult r = Hachi("submit --parsable -p gpu-shared " + args, false);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return std::atoll(r.out.c_str());
  }
  std::string dir_;
};

TEST_F(MigE2e, SlicesAreScheduledIsolatedAndShown) {
  const std::string config = dir_ + "/cluster.toml";
  std::ofstream(config) << "[[partition]]\nname = \"gpu-shared\"\nnodes = \"all\"\n"
                           "mode = \"shared\"\n[burn_in]\nchecks = []\n";
  const std::string topo_path = dir_ + "/topo.json";
  std::ofstream(topo_path) << topo::TopologyToJson(*topo::LoadPreset("hgx-h100"));
  const std::string events = dir_ + "/nvml-events";
  std::ofstream(events) << "migdev 0 1g.10gb 1g.10gb\n";  // GI ids 1 and 2, CI 0
  const std::string caps = dir_ + "/caps";
  std::filesystem::create_directories(caps + "/proc/driver/nvidia-caps");
  std::ofstream(caps + "/proc/driver/nvidia-caps/mig-minors")
      << "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
         "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\n";
  std::ofstream(caps + "/proc/devices") << "Character devices:\n195 nvidia\n"
                                           "239 nvidia-caps\n";
  ::setenv("HACHI_NVML_LIBRARY", FakeNvmlLibrary().c_str(), 1);
  ::setenv("HACHI_FAKE_NVML_TOPOLOGY", topo_path.c_str(), 1);
  ::setenv("HACHI_FAKE_NVML_EVENTS", events.c_str(), 1);
  ::setenv("HACHI_MIG_CAPS_ROOT", caps.c_str(), 1);
  DevCluster dev(dir_, "--config " + config + " --mps off");
  ::unsetenv("HACHI_NVML_LIBRARY");
  ::unsetenv("HACHI_FAKE_NVML_TOPOLOGY");
  ::unsetenv("HACHI_FAKE_NVML_EVENTS");
  ::unsetenv("HACHI_MIG_CAPS_ROOT");
  ASSERT_FALSE(dev.url().empty()) << ReadFile(dir_ + "/dev.log");
  std::string node;
  json devices;
  ASSERT_TRUE(WaitUntil(10, [&] {
    const json n = json::parse(Hachi("nodes --json", false).out, nullptr, false);
    if (!n.contains("nodes") || n["nodes"].empty()) return false;
    node = n["nodes"][0]["name"];
    devices = n["nodes"][0]["mig_devices"];
    return n["nodes"][0]["state"] == "up";
  })) << ReadFile(dir_ + "/dev.log");
  ASSERT_EQ(devices.size(), 2u) << devices.dump();
  const std::string uuid0 = devices[0]["uuid"], uuid1 = devices[1]["uuid"];
  ASSERT_EQ(uuid0.rfind("MIG-", 0), 0u);

  // A profile no node has: refused at once, naming the ones that exist.
  const testing::CmdResult none = Hachi(
      "submit -p gpu-shared --gres=gpu:3g.40gb:1 "
      "--wrap true");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.out.find("no node of partition gpu-shared has 3g.40gb MIG devices (MIG "
                          "profiles there: 1g.10gb)"),
            std::string::npos)
      << none.out;

  const std::string wait =
      "for i in $(seq 600); do [ -e " + dir_ + "/go ] && break; sleep 0.1; done";
  const std::string script = "--wrap 'echo dev=$CUDA_VISIBLE_DEVICES; " + wait + "'";
  const std::string out = " -o " + dir_ + "/out-%j ";
  const int64_t a = Submit("--gres=gpu:1g.10gb:1" + out + script);
  const int64_t b = Submit("--gres=gpu:1g.10gb:1" + out + script);
  ASSERT_TRUE(WaitUntil(
      30, [&] { return ShownState(a) == "RUNNING" && ShownState(b) == "RUNNING"; }))
      << ShownState(a) << " " << ShownState(b) << ReadFile(dir_ + "/dev.log");
  const int64_t c = Submit("--gres=gpu:1g.10gb:1" + out + script);
  // Whole GPUs: seven exist beside the MIG GPU, and GPU 0 is never one of them.
  const int64_t whole = Submit("--gres=gpu:7 -o /dev/null --wrap '" + wait + "'");
  const testing::CmdResult eight = Hachi("submit -p gpu-shared --gres=gpu:8 --wrap true");
  EXPECT_NE(eight.exit_code, 0) << eight.out;
  ASSERT_TRUE(WaitUntil(30, [&] { return ShownState(whole) == "RUNNING"; }));
  EXPECT_EQ(ShownJob(whole)["allocations"][0]["gpus"], "1-7");

  // Each job sees its own device, by UUID.
  auto seen = [&](int64_t id) {
    const std::string text = ReadFile(dir_ + "/out-" + std::to_string(id));
    const size_t at = text.find("dev=");
    return at == std::string::npos ? std::string()
                                   : std::string(Trim(text.substr(at + 4)));
  };
  ASSERT_TRUE(WaitUntil(10, [&] { return !seen(a).empty() && !seen(b).empty(); }));
  const json ja = ShownJob(a), jb = ShownJob(b);
  ASSERT_EQ(ja["allocations"][0]["mig"].size(), 1u);
  EXPECT_EQ(seen(a), ja["allocations"][0]["mig"][0]);
  EXPECT_EQ(seen(b), jb["allocations"][0]["mig"][0]);
  EXPECT_NE(seen(a), seen(b));
  EXPECT_TRUE((seen(a) == uuid0 || seen(a) == uuid1) &&
              (seen(b) == uuid0 || seen(b) == uuid1))
      << seen(a) << " " << seen(b);
  EXPECT_EQ(ja["allocations"][0]["gpus"], "0");

  // The third waits, saying why with the numbers.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(ShownState(c), "PENDING");
  const std::string why = Hachi("show job " + std::to_string(c)).out;
  EXPECT_NE(
      why.find("no free 1g.10gb MIG device: 0 of 2 free on the nodes of gpu-shared"),
      std::string::npos)
      << why;
  // Shown: the node's picture and the job's devices.
  const std::string pic = Hachi("nodes --gpus").out;
  EXPECT_NE(pic.find("gpu0 MIG 2/2 used"), std::string::npos) << pic;
  EXPECT_NE(pic.find("gpu0 MIG: 1g.10gb x2"), std::string::npos) << pic;
  EXPECT_NE(pic.find("in use: 1g.10gb job "), std::string::npos) << pic;
  const std::string shown = Hachi("show job " + std::to_string(a)).out;
  EXPECT_NE(shown.find("Mig=1g.10gb(" + seen(a) + ")"), std::string::npos) << shown;
  EXPECT_NE(shown.find("TresPerNode=gres:gpu:1g.10gb:1"), std::string::npos) << shown;

  // One ends: the third gets its device.
  Hachi("cancel " + std::to_string(a));
  ASSERT_TRUE(WaitUntil(30, [&] { return ShownState(c) == "RUNNING"; }))
      << ShownState(c) << ReadFile(dir_ + "/dev.log");
  EXPECT_EQ(ShownJob(c)["allocations"][0]["mig"][0], ja["allocations"][0]["mig"][0]);
  std::ofstream(dir_ + "/go") << "";
  EXPECT_TRUE(WaitUntil(30,
                        [&] {
                          return ShownState(b) == "COMPLETED" &&
                                 ShownState(c) == "COMPLETED" &&
                                 ShownState(whole) == "COMPLETED";
                        }))
      << ShownState(b) << ShownState(c) << ShownState(whole);
}

}  // namespace
}  // namespace hachi::cli
