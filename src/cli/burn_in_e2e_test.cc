// The burn-in gate end to end (docs/burn-in.md): `hachi dev` whose nodes must
// pass their checks before they take jobs. A node whose check fails never receives a
// job and says why (`hachi nodes`, `show node`, the API); once fixed, `hachi resume`
// runs the checks again, the node passes and takes the job. A GPU back from repair
// (`resume --gpu`) is burned in on its own.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "cli/dev_testing.h"
#include "core/testing/paths.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::cli {
namespace {

using nlohmann::json;

class BurnInE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-burnin-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  // The node named `name` as the API has it.
  static json Node(const std::string& name) {
    const json nodes = json::parse(Hachi("nodes --json", false).out, nullptr, false);
    if (!nodes.is_object() || !nodes.contains("nodes")) return json();
    for (const json& n : nodes["nodes"]) {
      if (n.value("name", "") == name) return n;
    }
    return json();
  }
  // Waits until `pred(node)` holds (or `seconds` pass); the node as last read.
  template <typename Pred>
  static json WaitNode(const std::string& name, int seconds, Pred pred) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    json n;
    while (std::chrono::steady_clock::now() < end) {
      n = Node(name);
      if (!n.is_null() && pred(n)) return n;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return n;
  }
  static std::string JobState(int64_t id) {
    const json j = json::parse(Hachi("queue -a --json", false).out, nullptr, false);
    if (!j.is_object() || !j.contains("jobs")) return "";
    for (const json& job : j["jobs"]) {
      if (job["id"] == id) return job["state"];
    }
    return "";
  }
  static bool WaitJob(int64_t id, const std::string& state, int seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (JobState(id) == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // `hachi dev` on "real" GPUs: the fake libnvidia-ml.so.1 serving an HGX H100 whose
  // faults are the lines of `events`; the node's name in *node.
  std::unique_ptr<DevCluster> StartOnFakeNvml(const std::string& config,
                                              const std::string& events,
                                              std::string* node) {
    const std::string topo_path = dir_ + "/topo.json";
    std::ofstream(topo_path) << topo::TopologyToJson(*topo::LoadPreset("hgx-h100"));
    ::setenv("HACHI_NVML_LIBRARY", FakeNvmlLibrary().c_str(), 1);
    ::setenv("HACHI_FAKE_NVML_TOPOLOGY", topo_path.c_str(), 1);
    ::setenv("HACHI_FAKE_NVML_EVENTS", events.c_str(), 1);
    auto dev = std::make_unique<DevCluster>(dir_, "--config " + config);
    ::unsetenv("HACHI_NVML_LIBRARY");
    ::unsetenv("HACHI_FAKE_NVML_TOPOLOGY");
    ::unsetenv("HACHI_FAKE_NVML_EVENTS");
    for (int i = 0; i < 100 && node->empty() && !dev->url().empty(); ++i) {
      const json nodes = json::parse(Hachi("nodes --json", false).out, nullptr, false);
      if (nodes.contains("nodes") && !nodes["nodes"].empty()) {
        *node = nodes["nodes"][0]["name"];
      }
      if (node->empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return dev;
  }

  std::string dir_;
};

// The default check, `hachi doctor`, on "real" GPUs (the fake NVML): GPU 3's persistence
// mode is off, so the node fails its burn-in and takes no job, saying which check found
// what; the operator turns persistence on, resumes the node, and doctor passes (its host
// warnings do not fail a burn-in). `--root` points doctor's /proc and /sys at an empty
// tree: the test machine's own are not what is under test.
TEST_F(BurnInE2e, DoctorFailsANodeUntilTheFaultIsFixed) {
  const std::string root = dir_ + "/root";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  const std::string config = dir_ + "/cluster.toml";
  std::ofstream(config) << "[burn_in]\nchecks = [\"doctor --root " << root << "\"]\n";
  const std::string events = dir_ + "/nvml-events";
  std::ofstream(events) << "persistence 3 off\n";
  std::string node;
  std::unique_ptr<DevCluster> dev = StartOnFakeNvml(config, events, &node);
  ASSERT_FALSE(node.empty()) << ReadFile(dir_ + "/dev.log");

  json n = WaitNode(node, 30,
                    [](const json& x) { return x.value("burn_in", "") == "failed"; });
  ASSERT_EQ(n.value("state", ""), "burn-in") << n.dump() << ReadFile(dir_ + "/dev.log");
  const std::string reason = n.value("state_reason", "");
  EXPECT_EQ(
      reason.rfind("burn-in failed: doctor: persistence: GPU 3: persistence mode off", 0),
      0u)
      << reason;
  const testing::CmdResult sub = Hachi("submit --parsable -G 1 -t 5:00 -- true", false);
  ASSERT_EQ(sub.exit_code, 0) << sub.out;
  const int64_t id = std::atoll(sub.out.c_str());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(JobState(id), "PENDING");
  EXPECT_NE(Hachi("nodes").out.find("burn-in failed: doctor: persistence: GPU 3"),
            std::string::npos);

  std::ofstream(events, std::ios::app) << "persistence 3 on\n";
  ASSERT_EQ(Hachi("resume " + node, false).exit_code, 0);
  n = WaitNode(node, 30, [](const json& x) { return x.value("state", "") == "up"; });
  EXPECT_EQ(n.value("state", ""), "up") << n.dump() << ReadFile(dir_ + "/dev.log");
  EXPECT_TRUE(WaitJob(id, "COMPLETED", 20)) << JobState(id);
}

// A site script as the check, on a one-node simulated cluster that asks for burn-in: it
// fails until the operator's fix (a file) is in place.
TEST_F(BurnInE2e, FailingNodeTakesNoJobUntilFixedAndResumed) {
  const std::string script = dir_ + "/site-check.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                           "echo \"checking $HACHI_NODE [$HACHI_BURN_IN_GPUS]\"\n"
                           "[ -f " +
                               dir_ +
                               "/fixed ] && exit 0\n"
                               "echo 'nvlink: GPU 3 link 2 is down' >&2\n"
                               "exit 3\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  const std::string config = dir_ + "/cluster.toml";
  std::ofstream(config) << "[burn_in]\nchecks = [\"" << script
                        << "\"]\nsimulated = true\ntimeout = \"2m\"\n";
  DevCluster dev(dir_, "--nodes 1 --config " + config);
  ASSERT_FALSE(dev.url().empty()) << ReadFile(dir_ + "/dev.log");

  const std::string why =
      "burn-in failed: " + script + ": exit code 3: nvlink: GPU 3 link 2 is down";
  json n = WaitNode("node1", 20,
                    [](const json& x) { return x.value("burn_in", "") == "failed"; });
  ASSERT_EQ(n.value("state", ""), "burn-in") << n.dump() << ReadFile(dir_ + "/dev.log");
  EXPECT_EQ(n.value("state_reason", ""), why);
  EXPECT_NE(Hachi("nodes").out.find(" burn-in gpu:h100:8"), std::string::npos);
  EXPECT_NE(Hachi("nodes").out.find(why), std::string::npos);

  // A job waits: the only node is out of service, and says why.
  const testing::CmdResult sub = Hachi("submit --parsable -G 1 -t 5:00 -- true", false);
  ASSERT_EQ(sub.exit_code, 0) << sub.out;
  const int64_t id = std::atoll(sub.out.c_str());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(JobState(id), "PENDING");
  EXPECT_NE(Hachi("explain " + std::to_string(id), false).out.find("drained"),
            std::string::npos);

  // Fixed: resume runs the checks again; the node passes and takes the job.
  std::ofstream(dir_ + "/fixed") << "";
  ASSERT_EQ(Hachi("resume node1", false).exit_code, 0);
  n = WaitNode("node1", 20, [](const json& x) { return x.value("state", "") == "up"; });
  EXPECT_EQ(n.value("state", ""), "up") << n.dump() << ReadFile(dir_ + "/dev.log");
  EXPECT_FALSE(n.contains("burn_in")) << n.dump();
  EXPECT_TRUE(WaitJob(id, "COMPLETED", 20)) << JobState(id);
  EXPECT_NE(ReadFile(dir_ + "/dev.log").find("node node1: burn-in passed"),
            std::string::npos);

  // Known and passed: a restart of the cluster does not burn it in again.
  dev.Stop();
  dev.Start("--nodes 1 --config " + config);
  ASSERT_FALSE(dev.url().empty());
  n = WaitNode("node1", 10, [](const json& x) { return x.value("state", "") == "up"; });
  EXPECT_EQ(n.value("state", ""), "up") << n.dump();
  EXPECT_EQ(ReadFile(dir_ + "/dev.log").find("burn-in: running"), std::string::npos);
}

// A GPU back from repair is burned in on its own: `hachi dev` on "real" GPUs (the fake
// libnvidia-ml.so.1, an HGX H100), GPU 5 falls off the bus (an Xid 79 event), and
// `resume --gpu 5` burns it in: it stays out of service (the node keeps its other GPUs
// in service) until its run passes, and the check is told which GPU.
TEST_F(BurnInE2e, GpuBackFromRepairIsBurnedInAlone) {
  const std::string script = dir_ + "/gpu-check.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                           "echo \"[$HACHI_BURN_IN_GPUS]\" >> " +
                               dir_ +
                               "/asked\n"
                               "[ -f " +
                               dir_ +
                               "/fixed ] && exit 0\n"
                               "echo \"GPU $HACHI_BURN_IN_GPUS still reports Xid 79\"\n"
                               "exit 4\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  std::ofstream(dir_ + "/fixed") << "";  // the node itself passes
  const std::string config = dir_ + "/cluster.toml";
  std::ofstream(config) << "[burn_in]\nchecks = [\"" << script << "\"]\n";
  const std::string events = dir_ + "/nvml-events";
  std::ofstream(events) << "";
  std::string node;
  std::unique_ptr<DevCluster> dev = StartOnFakeNvml(config, events, &node);
  ASSERT_FALSE(node.empty()) << ReadFile(dir_ + "/dev.log");
  // A real node (NVML) is burned in when it first registers, and passes.
  json n = WaitNode(node, 20, [](const json& x) { return x.value("state", "") == "up"; });
  ASSERT_EQ(n.value("state", ""), "up") << n.dump() << ReadFile(dir_ + "/dev.log");
  EXPECT_FALSE(n.value("burn_in_passed", "").empty()) << n.dump();
  EXPECT_NE(ReadFile(dir_ + "/asked").find("[]"), std::string::npos);

  std::ofstream(events, std::ios::app) << "xid 5 79\n";
  n = WaitNode(node, 20, [](const json& x) { return x.value("unhealthy", "") == "5"; });
  ASSERT_EQ(n.value("unhealthy", ""), "5") << n.dump() << ReadFile(dir_ + "/dev.log");

  ::unlink((dir_ + "/fixed").c_str());
  ASSERT_EQ(Hachi("resume " + node + " --gpu 5", false).exit_code, 0);
  n = WaitNode(node, 20,
               [](const json& x) { return x.value("burn_in", "") == "failed"; });
  EXPECT_EQ(n.value("state", ""), "up") << n.dump();
  EXPECT_EQ(n.value("unhealthy", ""), "5") << n.dump();
  EXPECT_EQ(n["unhealthy_reasons"].value("5", ""),
            "burn-in failed: " + script + ": exit code 4: GPU 5 still reports Xid 79")
      << n.dump();
  // Its other GPUs take jobs meanwhile.
  const testing::CmdResult sub = Hachi("submit --parsable -G 7 -t 5:00 -- true", false);
  ASSERT_EQ(sub.exit_code, 0) << sub.out;
  EXPECT_TRUE(WaitJob(std::atoll(sub.out.c_str()), "COMPLETED", 20));

  // The repair holds: resume it again, it passes and comes back.
  std::ofstream(dir_ + "/fixed") << "";
  ASSERT_EQ(Hachi("resume " + node + " --gpu 5", false).exit_code, 0);
  n = WaitNode(node, 20, [](const json& x) { return x.value("unhealthy", "?") == ""; });
  EXPECT_EQ(n.value("unhealthy", "?"), "") << n.dump();
  EXPECT_FALSE(n.contains("burn_in")) << n.dump();
  EXPECT_NE(ReadFile(dir_ + "/asked").find("[5]"), std::string::npos)
      << ReadFile(dir_ + "/asked");
}

}  // namespace
}  // namespace hachi::cli
