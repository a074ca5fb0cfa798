// BurnInRunner (agent/burn_in.h): the checks' command lines, their verdicts,
// and runs of real processes: pass, fail with the reason, the timeout, a newer run.
#include "agent/burn_in.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/testing/wait_for.h"

namespace hachi::agent {
namespace {

TEST(BurnInCommand, DoctorAndCommtestAreThisBinarySiteScriptsAShellLine) {
  EXPECT_EQ(BurnInCommand("doctor --expect-gpus 8", "/usr/bin/hachi", {}),
            (std::vector<std::string>{"/usr/bin/hachi", "doctor", "--expect-gpus", "8",
                                      "--json"}));
  EXPECT_EQ(BurnInCommand("commtest", "/usr/bin/hachi", {3, 5}),
            (std::vector<std::string>{"/usr/bin/hachi", "commtest", "--json", "--gpu",
                                      "3", "--gpu", "5"}));
  // A GPU's run: doctor counts only the Xid lines of the run's window.
  EXPECT_EQ(BurnInCommand("doctor", "/usr/bin/hachi", {5}, 12),
            (std::vector<std::string>{"/usr/bin/hachi", "doctor", "--json", "--xid-since",
                                      "12s", "--gpu", "5"}));
  EXPECT_EQ(BurnInCommand("doctor", "/usr/bin/hachi", {}, 12),  // the node's: since boot
            (std::vector<std::string>{"/usr/bin/hachi", "doctor", "--json"}));
  EXPECT_EQ(BurnInCommand("/opt/site/check -q", "/usr/bin/hachi", {3}),
            (std::vector<std::string>{"/bin/sh", "-c", "/opt/site/check -q"}));
}

TEST(JudgeBurnInCheck, ExitCodesAndTheFirstFailItem) {
  EXPECT_TRUE(JudgeBurnInCheck("doctor", 0, 0, "", "").passed);
  EXPECT_TRUE(JudgeBurnInCheck("doctor", 1, 0, "", "").passed);  // warnings pass
  const std::string json =
      R"({"checks":[{"check":"driver","status":"OK","evidence":"550"},)"
      R"({"check":"time-sync","status":"WARN","evidence":"unsynchronised"},)"
      R"({"check":"persistence","status":"FAIL","gpu":3,"evidence":"persistence mode is off","fix":"nvidia-smi -pm 1"},)"
      R"({"check":"nvlink","status":"FAIL","gpus":[2,5],"evidence":"2 of 18 links down"}]})";
  BurnInVerdict v = JudgeBurnInCheck("doctor --x", 2, 0, json, "note on stderr\n");
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.reason, "persistence (GPU 3): persistence mode is off");
  v = JudgeBurnInCheck("commtest", 2, 0,
                       R"({"checks":[{"check":"commtest-pair-bandwidth","status":"FAIL",)"
                       R"("gpus":[2,5],"evidence":"2->5 at 40 % of 450 GB/s"}]})",
                       "");
  EXPECT_EQ(v.reason, "commtest-pair-bandwidth (GPUs 2-5): 2->5 at 40 % of 450 GB/s");
  // doctor's evidence names its GPU itself: not twice.
  v = JudgeBurnInCheck("doctor", 2, 0,
                       R"({"checks":[{"check":"persistence","status":"FAIL","gpu":3,)"
                       R"("evidence":"GPU 3: persistence mode off"}]})",
                       "");
  EXPECT_EQ(v.reason, "persistence: GPU 3: persistence mode off");
  // No JSON (it crashed, or is not there): the exit code and the last line said.
  v = JudgeBurnInCheck("doctor", 2, 0, "", "hachi doctor: no NVML\n\n");
  EXPECT_EQ(v.reason, "exit code 2: hachi doctor: no NVML");
  v = JudgeBurnInCheck("/opt/check", 3, 0, "GPU 3 link 2 down\n", "");
  EXPECT_EQ(v.reason, "exit code 3: GPU 3 link 2 down");
  v = JudgeBurnInCheck("/opt/check", -1, 9, "", "");
  EXPECT_EQ(v.reason, "killed by signal 9");
}

class BurnInRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-burnin-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
    return path;
  }
  BurnInRunner::Done Collect() {
    return [this](const api::BurnInReport& r) {
      std::lock_guard<std::mutex> lock(mu_);
      reports_.push_back(r);
      cv_.notify_all();
    };
  }
  // Waits for `n` reports (at most `seconds`).
  std::vector<api::BurnInReport> Wait(size_t n, int seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(seconds),
                 [&] { return reports_.size() >= n; });
    return reports_;
  }

  std::string dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<api::BurnInReport> reports_;
};

TEST_F(BurnInRunnerTest, ChecksRunInOrderAndTheFirstFailureEndsTheRun) {
  const std::string out = dir_ + "/ran";
  const std::string a = Script(
      "a.sh", "echo \"a $HACHI_NODE [$HACHI_BURN_IN_GPUS]\" >> " + out + "\nexit 0\n");
  const std::string b = Script("b.sh", "echo b >> " + out +
                                           "\necho 'ECC: 2 uncorrectable on GPU 4' >&2\n"
                                           "exit 5\n");
  const std::string c = Script("c.sh", "echo c >> " + out + "\n");
  BurnInRunner runner("/nonexistent/hachi", "gpu-017", Collect());
  runner.Start({7, {a, b + " --quick", c}, {4, 6}, 60});
  const std::vector<api::BurnInReport> got = Wait(1, 20);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].run, 7);
  EXPECT_FALSE(got[0].passed);
  EXPECT_EQ(got[0].check, b + " --quick");
  EXPECT_EQ(got[0].reason, "exit code 5: ECC: 2 uncorrectable on GPU 4");
  std::ifstream in(out);
  const std::string ran((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(ran, "a gpu-017 [4,6]\nb\n");  // c never ran
}

// doctor and commtest are this binary's subcommands, with --json and --gpu; their JSON
// says why they failed.
TEST_F(BurnInRunnerTest, DoctorIsThisBinaryAndItsJsonTheReason) {
  const std::string self = Script(
      "hachi", "echo \"$@\" > " + dir_ +
                   "/args\n"
                   "echo '{\"checks\":[{\"check\":\"fabric-manager\",\"status\":\"FAIL\","
                   "\"evidence\":\"nv-fabricmanager is not running\"}]}'\n"
                   "exit 2\n");
  BurnInRunner runner(self, "n1", Collect());
  runner.Start({1, {"doctor --expect-gpus 8"}, {2}, 60});
  const std::vector<api::BurnInReport> got = Wait(1, 20);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].reason, "fabric-manager: nv-fabricmanager is not running");
  std::ifstream in(dir_ + "/args");
  std::string args;
  std::getline(in, args);
  EXPECT_EQ(args, "doctor --expect-gpus 8 --json --xid-since 10s --gpu 2");
}

// A check past the run's timeout (on the runner's Clock) is killed with what it started;
// a newer run replaces one under way, which then reports nothing. Each slow check marks
// that it runs, so the clock moves, or the run is replaced, only once it does.
TEST_F(BurnInRunnerTest, TimeoutKillsTheCheckAndANewerRunReplacesOne) {
  const std::string slow1 =
      Script("slow1.sh", "touch " + dir_ + "/started1\nsleep 30 & sleep 30\n");
  const std::string slow2 =
      Script("slow2.sh", "touch " + dir_ + "/started2\nsleep 30 & sleep 30\n");
  const std::string ok = Script("ok.sh", "exit 0\n");
  auto started = [&](const std::string& name) {
    return WaitFor([&] { return ::access((dir_ + "/" + name).c_str(), F_OK) == 0; });
  };
  FakeClock clock;
  BurnInRunner runner("/nonexistent/hachi", "n1", Collect(), &clock);
  runner.Start({1, {slow1}, {}, 1});
  ASSERT_TRUE(started("started1"));
  clock.Advance(std::chrono::seconds(1));  // the run's timeout: reached
  std::vector<api::BurnInReport> got = Wait(1, 20);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].passed);
  EXPECT_EQ(got[0].reason, "timed out after 1 s");

  runner.Start({2, {slow2}, {}, 600});
  ASSERT_TRUE(started("started2"));
  runner.Start({3, {ok}, {}, 600});
  got = Wait(2, 20);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].run, 3);  // run 2 said nothing
  EXPECT_TRUE(got[1].passed);
  runner.Stop();
}

}  // namespace
}  // namespace hachi::agent
