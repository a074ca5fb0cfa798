// MpsDaemons against a fake nvidia-cuda-mps-control (testdata/mps/), which logs what it
// is told where the real one does: one daemon per shared GPU, started before the first
// share and stopped after the last, its crash reported and restarted, a server fault
// reported with the jobs it hits, and an earlier agent's daemons adopted or stopped.
#include "agent/mps.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::agent {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Alive(pid_t pid) { return pid > 0 && kill(pid, 0) == 0; }

struct Event {
  int gpu;
  std::string kind, message;
};

class MpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-mps-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  MpsOptions Options() {
    MpsOptions o;
    o.control = FakeMpsControl();
    o.dir = dir_ + "/mps";
    o.devices = {"GPU-aaaa", "GPU-bbbb", "2", "3"};
    o.stop_wait_ms = 3000;
    o.check_interval_ms = 50;
    o.on_event = [this](int gpu, const std::string& kind, const std::string& message) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back({gpu, kind, message});
    };
    return o;
  }
  std::vector<Event> Events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::string ControlLog(int gpu) {
    return Read(dir_ + "/mps/gpu" + std::to_string(gpu) + "/log/control.log");
  }

  std::string dir_;
  std::mutex mu_;
  std::vector<Event> events_;
};

TEST_F(MpsTest, OneDaemonPerSharedGpuFromFirstShareToLast) {
  MpsDaemons mps(Options());
  Result<MpsClient> a = mps.Acquire(1, 11);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->pipe_dir, dir_ + "/mps/gpu1/pipe");
  EXPECT_EQ(a->log_dir, dir_ + "/mps/gpu1/log");
  EXPECT_EQ(a->device, "GPU-bbbb");  // the UUID: MPS remaps indices, not UUIDs
  const pid_t pid = mps.DaemonPid(1);
  ASSERT_TRUE(Alive(pid));
  // The daemon sees its GPU alone, by UUID.
  EXPECT_NE(ControlLog(1).find("on device GPU-bbbb"), std::string::npos) << ControlLog(1);

  // A second share of the GPU goes through the same daemon; another GPU gets its own.
  Result<MpsClient> b = mps.Acquire(1, 12);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(mps.DaemonPid(1), pid);
  Result<MpsClient> c = mps.Acquire(2, 13);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->device, "0");  // no UUID known: the one device its server shows
  EXPECT_NE(ControlLog(2).find("on device 2"), std::string::npos) << ControlLog(2);
  EXPECT_EQ(mps.Serving(), (std::vector<int>{1, 2}));

  mps.Release(11);  // one share of GPU 1 is left
  EXPECT_TRUE(Alive(pid));
  mps.Release(12);  // the last: told to quit, and gone
  EXPECT_TRUE(WaitFor([&] { return !Alive(pid); }));
  EXPECT_NE(ControlLog(1).find("User did send quit"), std::string::npos) << ControlLog(1);
  EXPECT_NE(ControlLog(1).find("Exit"), std::string::npos);
  EXPECT_EQ(mps.Serving(), (std::vector<int>{2}));
  mps.Release(12);  // again: nothing
  mps.Release(13);
  EXPECT_TRUE(mps.Serving().empty());
  EXPECT_TRUE(Events().empty());
  EXPECT_TRUE(WaitFor([&] {
    return ControlLog(2).find("User did send quit") != std::string::npos;
  })) << ControlLog(2);

  // Used again later: a fresh daemon.
  ASSERT_TRUE(mps.Acquire(1, 14).ok());
  EXPECT_TRUE(Alive(mps.DaemonPid(1)));
  EXPECT_NE(mps.DaemonPid(1), pid);
  mps.Release(14);
}

TEST_F(MpsTest, ACrashIsReportedAndRestarted) {
  MpsDaemons mps(Options());
  ASSERT_TRUE(mps.Acquire(0, 21).ok());
  ASSERT_TRUE(mps.Acquire(0, 22).ok());
  const pid_t first = mps.DaemonPid(0);
  std::ofstream(dir_ + "/mps/gpu0/pipe/.crash") << "";
  ASSERT_TRUE(WaitFor([&] { return !Events().empty(); }));
  const Event e = Events()[0];
  EXPECT_EQ(e.gpu, 0);
  EXPECT_EQ(e.kind, "mps-died");
  EXPECT_EQ(e.message,
            "MPS control daemon for GPU 0 exited with status 3 while serving jobs 21, "
            "22; restarted");
  EXPECT_TRUE(Alive(mps.DaemonPid(0)));
  EXPECT_NE(mps.DaemonPid(0), first);
  mps.Release(21);
  mps.Release(22);
  EXPECT_TRUE(mps.Serving().empty());
}

TEST_F(MpsTest, GivesUpOnADaemonThatKeepsDying) {
  MpsOptions o = Options();
  o.max_restarts = 2;
  MpsDaemons mps(o);
  ASSERT_TRUE(mps.Acquire(3, 31).ok());
  for (int i = 0; i < 2; ++i) {
    const size_t before = Events().size();
    ASSERT_TRUE(WaitFor([&] { return mps.DaemonPid(3) > 0; }));
    std::ofstream(dir_ + "/mps/gpu3/pipe/.crash") << "";
    ASSERT_TRUE(WaitFor([&] { return Events().size() > before; }));
  }
  EXPECT_EQ(Events().back().kind, "mps-failed");
  EXPECT_NE(Events().back().message.find("died 2 times within a minute"),
            std::string::npos)
      << Events().back().message;
  EXPECT_EQ(mps.DaemonPid(3), 0);
  // Shares launched meanwhile run without MPS, and say why.
  Result<MpsClient> next = mps.Acquire(3, 32);
  EXPECT_FALSE(next.ok());
  EXPECT_NE(next.status().message().find("failed 2 times within a minute"),
            std::string::npos);
  // Once its shares are gone, the GPU gets a daemon again.
  mps.Release(31);
  mps.Release(32);
  ASSERT_TRUE(mps.Acquire(3, 33).ok());
  mps.Release(33);
}

TEST_F(MpsTest, AServerFaultIsReportedWithTheJobsItHits) {
  MpsDaemons mps(Options());
  ASSERT_TRUE(mps.Acquire(1, 41).ok());
  ASSERT_TRUE(mps.Acquire(1, 42).ok());
  std::ofstream(dir_ + "/mps/gpu1/pipe/.log-line")
      << "Server 4242 has fault: client 999 hit an illegal memory access\n";
  ASSERT_TRUE(WaitFor([&] { return !Events().empty(); }));
  EXPECT_EQ(Events()[0].kind, "mps-fault");
  EXPECT_NE(Events()[0].message.find(
                "MPS server on GPU 1 reported a fault; its clients (jobs 41, 42) are "
                "affected"),
            std::string::npos)
      << Events()[0].message;
  mps.Release(41);
  mps.Release(42);
}

TEST_F(MpsTest, AnEarlierAgentsDaemonIsKeptWhileItsRunsLast) {
  pid_t left = 0;
  {
    MpsDaemons first(Options());
    ASSERT_TRUE(first.Acquire(2, 51).ok());
    left = first.DaemonPid(2);
  }  // the agent stops; job 51 runs on, and so does its daemon
  ASSERT_TRUE(Alive(left));
  {
    MpsDaemons second(Options());
    second.AdoptLeftovers({51});
    EXPECT_EQ(second.DaemonPid(2), left);
    // A new share of that GPU goes through it.
    Result<MpsClient> c = second.Acquire(2, 52);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(second.DaemonPid(2), left);
    second.Release(51);
    EXPECT_TRUE(Alive(left));
    second.Release(52);
    EXPECT_TRUE(WaitFor([&] { return !Alive(left); }));
  }
  // No runs to serve: a leftover daemon is stopped.
  pid_t again = 0;
  {
    MpsDaemons first(Options());
    ASSERT_TRUE(first.Acquire(0, 61).ok());
    again = first.DaemonPid(0);
  }
  MpsDaemons second(Options());
  second.AdoptLeftovers({});
  EXPECT_TRUE(WaitFor([&] { return !Alive(again); }));
  EXPECT_TRUE(second.Serving().empty());
}

TEST_F(MpsTest, ADaemonThatCannotStartIsAnErrorNamingIt) {
  MpsOptions o = Options();
  o.control = "/bin/false";
  MpsDaemons mps(o);
  Result<MpsClient> c = mps.Acquire(0, 71);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("MPS control daemon for GPU 0 exited at start"),
            std::string::npos)
      << c.status().message();
  EXPECT_TRUE(mps.Serving().empty());
  mps.Release(71);
}

TEST(MpsUnavailableTest, SaysWhy) {
  std::string path;
  EXPECT_EQ(MpsUnavailable("off", "", false, {}, &path), "off (--mps off)");
  EXPECT_EQ(MpsUnavailable("auto", FakeMpsControl(), true, {}, &path),
            "simulated GPUs (--mps on to use it anyway)");
  EXPECT_EQ(MpsUnavailable("auto", "no-such-mps-control-here", false, {}, &path),
            "no no-such-mps-control-here in PATH");
  EXPECT_EQ(
      MpsUnavailable("on", "/nonexistent/nvidia-cuda-mps-control", false, {}, &path),
      "cannot run /nonexistent/nvidia-cuda-mps-control");
  EXPECT_EQ(
      MpsUnavailable("auto", FakeMpsControl(), false, {"Tesla P100-PCIE-16GB"}, &path),
      "Tesla P100-PCIE-16GB: MPS per-client memory limits need Volta or newer");
  EXPECT_EQ(MpsUnavailable("on", FakeMpsControl(), true,
                           {"NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB"}, &path),
            "");
  EXPECT_EQ(path, FakeMpsControl());
  EXPECT_TRUE(PreVoltaModel("Tesla K80"));
  EXPECT_TRUE(PreVoltaModel("NVIDIA GeForce GTX 1080 Ti"));
  EXPECT_FALSE(PreVoltaModel("NVIDIA A100-SXM4-80GB"));
  EXPECT_FALSE(PreVoltaModel("NVIDIA L40S"));
}

}  // namespace
}  // namespace hachi::agent
