// MpsDaemons against a fake nvidia-cuda-mps-control (testdata/mps/), which logs what it
// is told where the real one does: one daemon per shared GPU, started before the first
// share and stopped after the last, its crash reported and restarted, a server fault
// reported with the jobs it hits, and an earlier agent's daemons adopted or stopped.
#include "agent/mps.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
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

// The agent's own user: what an agent that is not root runs every daemon as.
MpsUser Me() { return MpsUser{geteuid(), getegid(), {}}; }

// The real uid of process `pid` (its /proc status), -1 when unknown.
long UidOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Uid:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

// What opening directory `path` as `uid` gives: 0, or the errno. In a child, with the
// raw calls only (the test has threads).
int OpenDirAs(uid_t uid, const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (syscall(SYS_setgroups, 0, nullptr) != 0 ||
        syscall(SYS_setresgid, uid, uid, uid) != 0 ||
        syscall(SYS_setresuid, uid, uid, uid) != 0) {
      _exit(125);
    }
    const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY);
    _exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

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
  Result<MpsClient> a = mps.Acquire(1, 11, Me());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->pipe_dir, dir_ + "/mps/gpu1/pipe");
  EXPECT_EQ(a->log_dir, dir_ + "/mps/gpu1/log");
  EXPECT_EQ(a->device, "GPU-bbbb");  // the UUID: MPS remaps indices, not UUIDs
  const pid_t pid = mps.DaemonPid(1);
  ASSERT_TRUE(Alive(pid));
  // The daemon sees its GPU alone, by UUID.
  EXPECT_NE(ControlLog(1).find("on device GPU-bbbb"), std::string::npos) << ControlLog(1);

  // A second share of the GPU goes through the same daemon; another GPU gets its own.
  Result<MpsClient> b = mps.Acquire(1, 12, Me());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(mps.DaemonPid(1), pid);
  Result<MpsClient> c = mps.Acquire(2, 13, Me());
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
  ASSERT_TRUE(mps.Acquire(1, 14, Me()).ok());
  EXPECT_TRUE(Alive(mps.DaemonPid(1)));
  EXPECT_NE(mps.DaemonPid(1), pid);
  mps.Release(14);
}

// A daemon is its shares' user's: it runs as them (NVIDIA's recipe for MPS per user),
// its pipe and log directories are theirs alone, so another user cannot even look in,
// and the GPU's next user starts from directories of their own, not the last one's logs.
TEST_F(MpsTest, TheDaemonAndItsDirectoriesAreItsUsersAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: only a root agent switches users";
  chmod(dir_.c_str(), 0711);  // as the agent's spool is: users pass through
  // A copy of the fake the users can run wherever this checkout lives.
  const std::string control = dir_ + "/nvidia-cuda-mps-control";
  std::filesystem::copy_file(FakeMpsControl(), control);
  chmod(control.c_str(), 0755);
  MpsOptions o = Options();
  o.control = control;
  MpsDaemons mps(o);
  const MpsUser alice{61001, 61001, {}}, bob{61002, 61002, {}};

  Result<MpsClient> a = mps.Acquire(0, 81, alice);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(UidOf(mps.DaemonPid(0)), 61001);
  for (const std::string& d : {a->pipe_dir, a->log_dir}) {
    struct stat st {};
    ASSERT_EQ(lstat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_uid, 61001u) << d;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << d;
  }
  struct stat gpu_dir {};
  ASSERT_EQ(lstat((dir_ + "/mps/gpu0").c_str(), &gpu_dir), 0);
  EXPECT_EQ(gpu_dir.st_uid, 0u);  // the agent's files: its pid file, the daemon's output
  EXPECT_EQ(gpu_dir.st_mode & 07777, 0711u);
  EXPECT_EQ(OpenDirAs(61001, a->pipe_dir), 0);
  EXPECT_EQ(OpenDirAs(61002, a->pipe_dir), EACCES);
  EXPECT_EQ(OpenDirAs(61002, a->log_dir), EACCES);
  EXPECT_NE(ControlLog(0).find("Starting control daemon"), std::string::npos);

  // Another user's share of the GPU is refused while the daemon serves alice (the
  // scheduler never packs two users on one GPU), and says why.
  Result<MpsClient> other = mps.Acquire(0, 82, bob);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("serves uid 61001"), std::string::npos)
      << other.status().message();

  const pid_t first = mps.DaemonPid(0);
  mps.Release(81);
  ASSERT_TRUE(WaitFor([&] { return !Alive(first) && mps.Serving().empty(); }));
  Result<MpsClient> b = mps.Acquire(0, 83, bob);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(UidOf(mps.DaemonPid(0)), 61002);
  struct stat st {};
  ASSERT_EQ(lstat(b->log_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 61002u);
  EXPECT_EQ(OpenDirAs(61001, b->pipe_dir), EACCES);
  // Alice's log went with her daemon: bob's holds his daemon's start alone.
  EXPECT_EQ(ControlLog(0).find("User did send quit"), std::string::npos) << ControlLog(0);
  EXPECT_NE(ControlLog(0).find("Starting control daemon"), std::string::npos);
  mps.Release(83);
  EXPECT_TRUE(mps.Serving().empty());
}

TEST_F(MpsTest, ACrashIsReportedAndRestarted) {
  MpsDaemons mps(Options());
  ASSERT_TRUE(mps.Acquire(0, 21, Me()).ok());
  ASSERT_TRUE(mps.Acquire(0, 22, Me()).ok());
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
  ASSERT_TRUE(mps.Acquire(3, 31, Me()).ok());
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
  Result<MpsClient> next = mps.Acquire(3, 32, Me());
  EXPECT_FALSE(next.ok());
  EXPECT_NE(next.status().message().find("failed 2 times within a minute"),
            std::string::npos);
  // Once its shares are gone, the GPU gets a daemon again.
  mps.Release(31);
  mps.Release(32);
  ASSERT_TRUE(mps.Acquire(3, 33, Me()).ok());
  mps.Release(33);
}

TEST_F(MpsTest, AServerFaultIsReportedWithTheJobsItHits) {
  MpsDaemons mps(Options());
  ASSERT_TRUE(mps.Acquire(1, 41, Me()).ok());
  ASSERT_TRUE(mps.Acquire(1, 42, Me()).ok());
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
    ASSERT_TRUE(first.Acquire(2, 51, Me()).ok());
    left = first.DaemonPid(2);
  }  // the agent stops; job 51 runs on, and so does its daemon
  ASSERT_TRUE(Alive(left));
  {
    MpsDaemons second(Options());
    second.AdoptLeftovers({51});
    EXPECT_EQ(second.DaemonPid(2), left);
    // A new share of that GPU goes through it.
    Result<MpsClient> c = second.Acquire(2, 52, Me());
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
    ASSERT_TRUE(first.Acquire(0, 61, Me()).ok());
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
  Result<MpsClient> c = mps.Acquire(0, 71, Me());
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
