// Real jobs in real cgroups (DESIGN.md §4.7: real cgroups in integration tests; only GPUs
// are simulated, here by device nodes with NVIDIA's major number). Each test makes its
// own parent (hachi-test-<pid>-<mode>) and removes it, its job cgroups and its device
// nodes even when it fails. v1 and v2 where this machine has them; a hybrid machine's
// cgroup2 has no controllers, so there only the device filter and the kill run on v2.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "agent/cgroup.h"
#include "agent/launcher.h"
#include "agent/launcher_testing.h"
#include "agent/testing.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

using testing_util::Exits;
using testing_util::ProcessGone;
using testing_util::Slurp;

bool HasCapability(int cap) {
  std::istringstream in(Slurp("/proc/self/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("CapEff:", 0) == 0) {
      return (std::stoull(line.substr(7), nullptr, 16) >> cap) & 1;
    }
  }
  return false;
}

// Device nodes in a temporary directory, removed at the end.
class DevNodes {
 public:
  DevNodes() {
    char tmpl[] = "/tmp/hachi-dev-XXXXXX";
    if (mkdtemp(tmpl)) dir_ = tmpl;
  }
  ~DevNodes() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  bool Make(const std::string& name, unsigned major, unsigned minor) {
    return mknod((dir_ + "/" + name).c_str(), S_IFCHR | 0666, makedev(major, minor)) == 0;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// A driver of the mode under test with a parent of its own, and a launcher using it.
class RealCgroupTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    CgroupOptions o;
    o.mode = GetParam();
    o.parent = "hachi-test-" + std::to_string(getpid()) + "-" + GetParam();
    Result<std::unique_ptr<CgroupDriver>> d = OpenCgroups(o);
    if (!d.ok())
      GTEST_SKIP() << "no cgroup " << GetParam() << ": " << d.status().message();
    driver_ = std::move(*d);
    char tmpl[] = "/tmp/hachi-cgspool-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    spool_ = tmpl;
  }
  void TearDown() override {
    launcher_.reset();
    if (driver_) {
      for (const JobCgroup& cg : driver_->Leftovers())
        EXPECT_TRUE(driver_->Destroy(cg).ok());
      for (const std::string& dir : driver_->ParentDirs()) rmdir(dir.c_str());
    }
    if (!spool_.empty()) fs::remove_all(spool_);
  }
  // `waiter`: jobs under the job waiter, as `hachi agent` runs them (the next launcher
  // then adopts what this one leaves); without, it stops them.
  ProcessLauncher& Launcher(IsolationOptions iso = {}, bool waiter = true) {
    ProcessLauncher::Options o;
    o.spool_dir = spool_;
    if (waiter) o.waiter = TestWaiterBinary();
    o.isolation = std::move(iso);
    o.isolation.cgroups = driver_;
    launcher_ = std::make_unique<ProcessLauncher>(o, exits_.Callback());
    return *launcher_;
  }
  bool JobCgroupExists(JobId job) const {
    for (const std::string& dir : driver_->ParentDirs()) {
      if (fs::exists(dir + "/job-" + std::to_string(job))) return true;
    }
    return false;
  }

  std::shared_ptr<CgroupDriver> driver_;
  std::string spool_;
  Exits exits_;
  std::unique_ptr<ProcessLauncher> launcher_;
};

TEST_P(RealCgroupTest, JobOpensItsOwnGpusAndNotAnothers) {
  DevNodes dev;
  ASSERT_FALSE(dev.dir().empty());
  ASSERT_TRUE(dev.Make("nvidia0", 195, 0) && dev.Make("nvidia2", 195, 2) &&
              dev.Make("nvidia3", 195, 3) && dev.Make("nvidiactl", 195, 255))
      << strerror(errno);
  // Outside a job the nodes open as far as the driver goes: no NVIDIA driver here, so
  // ENXIO, not EPERM; an EPERM inside the job is the cgroup's.
  const int fd = open((dev.dir() + "/nvidia0").c_str(), O_RDONLY);
  ASSERT_LT(fd, 0);
  ASSERT_NE(errno, EPERM);
  const std::string out = spool_ + "/devices.out";
  ProcessLauncher& l = Launcher();
  ASSERT_TRUE(l.Launch(MakeLaunch(1).Gpus({2, 3}).Out(out).Sh(
                           "for n in nvidia0 nvidia2 nvidia3 nvidiactl; do"
                           " (exec 3<" +
                           dev.dir() +
                           "/$n) 2>/dev/null && echo \"$n opened\" ||"
                           " (exec 3<" +
                           dev.dir() + "/$n) 2>&1 | sed \"s/^/$n: /\"; done"))
                  .ok());
  std::optional<api::JobExit> e = exits_.Wait(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kExited) << e->message;
  const std::string text = Slurp(out);
  auto line = [&](const std::string& n) {
    std::istringstream in(text);
    for (std::string s; std::getline(in, s);) {
      if (s.rfind(n + ":", 0) == 0 || s.rfind(n + " ", 0) == 0) return s;
    }
    return std::string();
  };
  EXPECT_NE(line("nvidia0").find("Operation not permitted"), std::string::npos) << text;
  for (const char* own : {"nvidia2", "nvidia3", "nvidiactl"}) {
    EXPECT_FALSE(line(own).empty()) << text;
    EXPECT_EQ(line(own).find("Operation not permitted"), std::string::npos) << text;
  }
}

// A job on a MIG device of GPU 1 opens /dev/nvidia1 and its device's two
// nvidia-caps access devices (gpu1/gi2/access, gpu1/gi2/ci0/access per a fake
// mig-minors), and neither another GPU nor the caps of another MIG device.
TEST_P(RealCgroupTest, MigJobOpensItsGpuAndItsOwnCapsOnly) {
  constexpr unsigned kCapsMajor = 239;  // as a fake /proc/devices says
  DevNodes dev;
  ASSERT_FALSE(dev.dir().empty());
  ASSERT_TRUE(dev.Make("nvidia0", 195, 0) && dev.Make("nvidia1", 195, 1) &&
              dev.Make("cap21", kCapsMajor, 21) && dev.Make("cap22", kCapsMajor, 22) &&
              dev.Make("cap30", kCapsMajor, 30) && dev.Make("cap31", kCapsMajor, 31))
      << strerror(errno);
  const std::string proc = dev.dir() + "/root";
  fs::create_directories(proc + "/proc/driver/nvidia-caps");
  std::ofstream(proc + "/proc/driver/nvidia-caps/mig-minors")
      << "config 1\nmonitor 2\ngpu1/gi2/access 21\ngpu1/gi2/ci0/access 22\n"
         "gpu1/gi3/access 30\ngpu1/gi3/ci0/access 31\n";
  std::ofstream(proc + "/proc/devices") << "Character devices:\n195 nvidia\n"
                                        << kCapsMajor << " nvidia-caps\n";
  IsolationOptions iso;
  iso.mig_caps_root = proc;
  ProcessLauncher& l = Launcher(std::move(iso));
  api::LaunchSpec spec =
      MakeLaunch(21)
          .Gpus({1})
          .Out(spool_ + "/mig.out")
          .Sh("for n in nvidia0 nvidia1 cap21 cap22 cap30 cap31; do (exec 3<" +
              dev.dir() + "/$n) 2>&1 | sed \"s/^/$n: /\"; echo \"$n done\"; done");
  spec.mig = {{"MIG-one", 1, 2, 0}};
  ASSERT_TRUE(l.Launch(spec).ok());
  std::optional<api::JobExit> e = exits_.Wait(21);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kExited) << e->message;
  const std::string text = Slurp(spool_ + "/mig.out");
  auto denied = [&](const std::string& n) {
    std::istringstream in(text);
    for (std::string s; std::getline(in, s);) {
      if (s.rfind(n + ":", 0) == 0 && s.find("Operation not permitted") != s.npos) {
        return true;
      }
    }
    return false;
  };
  for (const char* other : {"nvidia0", "cap30", "cap31"})
    EXPECT_TRUE(denied(other)) << text;
  for (const char* own : {"nvidia1", "cap21", "cap22"}) EXPECT_FALSE(denied(own)) << text;
  EXPECT_NE(text.find("cap31 done"), std::string::npos) << text;

  // Without the caps files the launch fails, naming the file, rather than run.
  IsolationOptions none;
  none.mig_caps_root = dev.dir() + "/nowhere";
  ProcessLauncher& l2 = Launcher(std::move(none));
  api::LaunchSpec lost = MakeLaunch(22).Gpus({1}).Out("/dev/null").Sh("true");
  lost.mig = {{"MIG-one", 1, 2, 0}};
  (void)l2.Launch(lost);
  std::optional<api::JobExit> f = exits_.Wait(22);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, api::ExitKind::kLaunchFailed);
  EXPECT_NE(f->message.find("mig-minors"), std::string::npos) << f->message;
}

TEST_P(RealCgroupTest, DoubleForkedSetsidChildDiesWithTheJob) {
  const std::string pidfile = spool_ + "/escaped.pid";
  ProcessLauncher& l = Launcher();
  // The grandchild leaves the job's session and is reparented away from it.
  ASSERT_TRUE(l.Launch(MakeLaunch(2)
                           .Out(spool_ + "/escape.out")
                           .Sh("(setsid sh -c 'echo $$ > " + pidfile +
                               "; exec sleep 300' &);"
                               " while [ ! -s " +
                               pidfile + " ]; do sleep 0.05; done; sleep 0.2"))
                  .ok());
  pid_t escaped = 0;
  ASSERT_TRUE(WaitFor([&] { return (escaped = std::atoi(Slurp(pidfile).c_str())) > 0; }));
  EXPECT_EQ(getsid(escaped), escaped);  // it did leave: a session of its own
  EXPECT_TRUE(JobCgroupExists(2));
  std::optional<api::JobExit> e = exits_.Wait(2);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kExited);
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(escaped); })) << "pid " << escaped;
  EXPECT_FALSE(JobCgroupExists(2));
}

// An agent that died left a job (no waiter: not adopted) whose escaped child the process
// group kill misses: the next launcher kills it through the cgroup.
TEST_P(RealCgroupTest, NextLauncherKillsTheCgroupsTheLastOneLeft) {
  const std::string pidfile = spool_ + "/left.pid";
  ASSERT_TRUE(Launcher({}, /*waiter=*/false)
                  .Launch(MakeLaunch(8)
                              .Out(spool_ + "/left.out")
                              .Sh("(setsid sh -c 'echo $$ > " + pidfile +
                                  "; exec sleep 300' &); sleep 300"))
                  .ok());
  pid_t escaped = 0;
  ASSERT_TRUE(WaitFor([&] { return (escaped = std::atoi(Slurp(pidfile).c_str())) > 0; }));
  launcher_.reset();  // the agent dies; its job does not
  ASSERT_FALSE(ProcessGone(escaped));
  ASSERT_TRUE(JobCgroupExists(8));
  ProcessLauncher& next = Launcher({}, /*waiter=*/false);
  const std::vector<std::string>& stopped = next.leftovers_stopped();
  EXPECT_TRUE(std::any_of(stopped.begin(), stopped.end(), [](const std::string& s) {
    return s.rfind("cgroup job-8 (", 0) == 0;
  })) << ::testing::PrintToString(stopped);
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(escaped); }));
  EXPECT_FALSE(JobCgroupExists(8));
}

// A run the next launcher adopts (its waiter outlived the agent) keeps its cgroup,
// escaped child included, until it ends; then the cgroup goes, with the child.
TEST_P(RealCgroupTest, AdoptedRunKeepsItsCgroupUntilItEnds) {
  const std::string pidfile = spool_ + "/adopted.pid", go = spool_ + "/go";
  ASSERT_TRUE(Launcher()
                  .Launch(MakeLaunch(9)
                              .Out(spool_ + "/adopted.out")
                              .Sh("(setsid sh -c 'echo $$ > " + pidfile +
                                  "; exec sleep 300' &);"
                                  " while [ ! -e " +
                                  go + " ]; do sleep 0.05; done; exit 3"))
                  .ok());
  pid_t escaped = 0;
  ASSERT_TRUE(WaitFor([&] { return (escaped = std::atoi(Slurp(pidfile).c_str())) > 0; }));
  launcher_.reset();
  ProcessLauncher& next = Launcher();
  EXPECT_EQ(next.runs_adopted().size(), 1u);
  EXPECT_TRUE(next.leftovers_stopped().empty());
  EXPECT_FALSE(ProcessGone(escaped));
  EXPECT_TRUE(JobCgroupExists(9));
  std::ofstream(go).close();
  std::optional<api::JobExit> e = exits_.Wait(9);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kExited);
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(escaped); }));
  EXPECT_FALSE(JobCgroupExists(9));
}

TEST_P(RealCgroupTest, OutOfMemoryEndsTheJobAndNotItsNeighbour) {
  if (!driver_->Enforces("memory")) GTEST_SKIP() << driver_->Describe();
  ProcessLauncher& l = Launcher();
  api::LaunchSpec hog =
      MakeLaunch(3).Out(spool_ + "/hog.out").Sh("head -c 1024m /dev/zero | tail");
  hog.memory_mib = 64;
  // The neighbour answers SIGUSR1 for as long as it lives (its stderr, in the same
  // file, may also say that the signal ended a sleep).
  const std::string n_out = spool_ + "/n.out";
  api::LaunchSpec neighbour =
      MakeLaunch(4)
          .Out(n_out)
          .Sh("trap 'echo alive' USR1; echo up; while :; do sleep 0.05; done")
          .Grace(1);
  neighbour.memory_mib = 64;
  ASSERT_TRUE(l.Launch(neighbour).ok());
  ASSERT_TRUE(WaitFor([&] { return Slurp(n_out) == "up\n"; }));
  ASSERT_TRUE(l.Launch(hog).ok());
  std::optional<api::JobExit> e = exits_.Wait(3, milliseconds(60000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kOutOfMemory);
  EXPECT_EQ(e->message, "out of memory: the job used more than its 64 MiB");
  EXPECT_FALSE(JobCgroupExists(3));
  // The neighbour is untouched: it still answers after the hog's end was reported.
  l.Signal(4, SIGUSR1, /*batch_only=*/false);
  EXPECT_TRUE(WaitFor([&] { return Slurp(n_out).find("alive\n") != std::string::npos; }))
      << Slurp(n_out);
  EXPECT_EQ(l.Running(), std::vector<JobId>{4});
  EXPECT_FALSE(exits_.Wait(4, milliseconds(1)).has_value());
  l.Cancel(4, "test");
  std::optional<api::JobExit> n = exits_.Wait(4);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->kind, api::ExitKind::kCancelled);
}

// The pids.max the kernel enforces add up to no more than the node's budget
// (here 6,000: pid_max and threads-max given, a reserve of 2,000).
TEST_P(RealCgroupTest, PidsMaxWrittenWithinTheNodesBudget) {
  if (!driver_->Enforces("pids")) GTEST_SKIP() << driver_->Describe();
  IsolationOptions iso;
  iso.pid_max = 8000;
  iso.threads_max = 1 << 20;
  iso.pids_reserve = 2000;
  ProcessLauncher& l = Launcher(iso);
  ASSERT_TRUE(
      l.Launch(MakeLaunch(11).Gpus({0}).Out("/dev/null").Sh("sleep 30").Grace(1)).ok());
  ASSERT_TRUE(
      l.Launch(MakeLaunch(12).Gpus({1, 2}).Out("/dev/null").Sh("sleep 30").Grace(1))
          .ok());
  auto pids_max = [&](JobId job) {
    for (const std::string& dir : driver_->ParentDirs()) {
      const std::string f = dir + "/job-" + std::to_string(job) + "/pids.max";
      if (fs::exists(f)) return Slurp(f);
    }
    return std::string("<none>");
  };
  EXPECT_EQ(pids_max(11), "4096\n");
  EXPECT_EQ(pids_max(12), "1904\n") << "8192 wanted; 6000 - 4096 left";
  // The budget is spent: the next launch fails rather than over-commits.
  ASSERT_TRUE(l.Launch(MakeLaunch(13).Gpus({3}).Out("/dev/null").Sh("true")).ok());
  std::optional<api::JobExit> refused = exits_.Wait(13);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->kind, api::ExitKind::kLaunchFailed);
  EXPECT_NE(refused->message.find("pids are taken"), std::string::npos)
      << refused->message;
  for (JobId j : {11, 12}) l.Cancel(j, "test");
  EXPECT_TRUE(exits_.Wait(11).has_value());
  EXPECT_TRUE(exits_.Wait(12).has_value());
}

TEST_P(RealCgroupTest, JobIsPinnedToCpusOfItsGpusNumaNode) {
  if (!driver_->Enforces("cpuset")) GTEST_SKIP() << driver_->Describe();
  IsolationOptions iso;
  iso.node_cpus = {0, 1};  // this 2-core machine; GPUs 0-1 near CPU 0, 2-3 near CPU 1
  iso.gpus = {{0, {0}}, {1, {0}}, {2, {1}}, {3, {1}}};
  ProcessLauncher& l = Launcher(iso);
  api::LaunchSpec a = MakeLaunch(5)
                          .Gpus({2, 3})
                          .Out(spool_ + "/a.out")
                          .Sh("grep Cpus_allowed_list /proc/self/status");
  a.cpus = 1;
  api::LaunchSpec b = MakeLaunch(6)
                          .Gpus({0})
                          .Out(spool_ + "/b.out")
                          .Sh("grep Cpus_allowed_list /proc/self/status");
  b.cpus = 1;
  ASSERT_TRUE(l.Launch(a).ok());
  ASSERT_TRUE(l.Launch(b).ok());
  ASSERT_TRUE(exits_.Wait(5).has_value());
  ASSERT_TRUE(exits_.Wait(6).has_value());
  EXPECT_EQ(Slurp(spool_ + "/a.out"), "Cpus_allowed_list:\t1\n");
  EXPECT_EQ(Slurp(spool_ + "/b.out"), "Cpus_allowed_list:\t0\n");
}

// What a cgroup costs a launch: made, joined, killed and removed per job (v1: five
// hierarchies and 252 device rules).
TEST_P(RealCgroupTest, LaunchToExitLatencyOfBinTrue) {
  constexpr int kRuns = 50;
  auto measure = [&](ProcessLauncher& l, Exits& exits, JobId first) {
    std::vector<double> ms;
    for (int i = 0; i < kRuns; ++i) {
      api::LaunchSpec s =
          MakeLaunch(first + i).Gpus({1}).Out("/dev/null").Argv({"/bin/true"});
      s.memory_mib = 256;
      s.cpus = 1;
      const auto start = std::chrono::steady_clock::now();
      EXPECT_TRUE(l.Launch(s).ok());
      std::optional<api::JobExit> e = exits.Wait(first + i);
      EXPECT_TRUE(e.has_value() && e->kind == api::ExitKind::kExited &&
                  e->exit_code == 0);
      ms.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count());
    }
    std::sort(ms.begin(), ms.end());
    return ms;
  };
  const std::vector<double> with = measure(Launcher(), exits_, 100);
  launcher_.reset();
  Exits plain_exits;
  ProcessLauncher::Options o;
  o.spool_dir = spool_ + "/plain";
  o.waiter = TestWaiterBinary();
  ProcessLauncher plain(o, plain_exits.Callback());
  const std::vector<double> without = measure(plain, plain_exits, 200);
  std::cout << "[ latency ] /bin/true launch-to-exit, " << kRuns << " runs: cgroup "
            << GetParam() << " median " << with[kRuns / 2] << " ms (p90 "
            << with[kRuns * 9 / 10] << "), no cgroup median " << without[kRuns / 2]
            << " ms (p90 " << without[kRuns * 9 / 10] << ")\n";
  EXPECT_LT(with[kRuns / 2], 250.0);
  EXPECT_FALSE(JobCgroupExists(100 + kRuns - 1));
}

INSTANTIATE_TEST_SUITE_P(Cgroup, RealCgroupTest, ::testing::Values("v1", "v2"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param;
                         });

// Runtime settings need no cgroup: memlock, open files, a private /dev/shm.
TEST(CgroupRuntime, JobGetsUnlimitedMemlockManyFilesAndItsOwnShm) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  char tmpl[] = "/tmp/hachi-rt-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    Exits exits;
    ProcessLauncher::Options o;
    o.spool_dir = dir;
    ProcessLauncher l(o, exits.Callback());
    ASSERT_TRUE(l.Launch(MakeLaunch(7)
                             .Shm(128)
                             .Out(dir + "/rt.out")
                             .Sh("grep -E 'locked memory|open files' /proc/self/limits;"
                                 " grep ' /dev/shm ' /proc/self/mountinfo; touch "
                                 "/dev/shm/hachi-rt-$$"))
                    .ok());
    std::optional<api::JobExit> e = exits.Wait(7);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, api::ExitKind::kExited) << e->message;
  }
  const std::string text = Slurp(dir + "/rt.out");
  fs::remove_all(dir);
  // Raising a hard limit needs CAP_SYS_RESOURCE (some containers drop it): then the
  // job gets the agent's hard limits as its soft ones.
  const bool can_raise = HasCapability(CAP_SYS_RESOURCE);
  auto row = [](const std::string& name, std::string v) {
    if (v.size() < 21) v.resize(21, ' ');
    std::string s = name;
    s.resize(26, ' ');
    return s + v + v;
  };
  rlimit memlock{}, nofile{};
  getrlimit(RLIMIT_MEMLOCK, &memlock);
  getrlimit(RLIMIT_NOFILE, &nofile);
  auto text_of = [](rlim_t v) {
    return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v);
  };
  EXPECT_NE(text.find(row("Max locked memory",
                          can_raise ? "unlimited" : text_of(memlock.rlim_max))),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(row("Max open files", can_raise ? "1048576" : text_of(nofile.rlim_max))),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("size=131072k"), std::string::npos) << text;
  // The job's files in /dev/shm went with its tmpfs.
  for (const auto& f : fs::directory_iterator("/dev/shm")) {
    EXPECT_EQ(f.path().filename().string().rfind("hachi-rt-", 0), std::string::npos);
  }
}

// A job's private /dev/shm is never bigger than its memory, whatever it asked.
TEST(CgroupRuntime, ShmIsBoundedByTheJobsMemory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  char tmpl[] = "/tmp/hachi-rt-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    Exits exits;
    ProcessLauncher::Options o;
    o.spool_dir = dir;
    ProcessLauncher l(o, exits.Callback());
    api::LaunchSpec spec = MakeLaunch(8)
                               .Shm(8192)
                               .Out(dir + "/shm.out")
                               .Sh("grep ' /dev/shm ' /proc/self/mountinfo");
    spec.memory_mib = 64;
    ASSERT_TRUE(l.Launch(spec).ok());
    std::optional<api::JobExit> e = exits.Wait(8);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, api::ExitKind::kExited) << e->message;
  }
  const std::string text = Slurp(dir + "/shm.out");
  fs::remove_all(dir);
  EXPECT_NE(text.find("size=65536k"), std::string::npos)
      << "8 GiB asked, 64 MiB of memory: " << text;
}

}  // namespace
}  // namespace hachi::agent
