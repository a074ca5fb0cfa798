// The job waiter enforces the node's lease (waiter.h, lease_file.h): real waiters and
// jobs on the real monotonic clock (the waiter is a process of its own and reads
// CLOCK_MONOTONIC), so the waits here are bounded waits on real time. Then the
// launcher's reports of runs a waiter stopped so: lost, whether the agent watched, came
// back while the run went on, or came back after it ended.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "agent/launcher.h"
#include "agent/launcher_testing.h"
#include "agent/lease_file.h"
#include "agent/spawn.h"
#include "agent/testing.h"
#include "agent/waiter.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::agent {
namespace {

namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace testing_util;  // Exits, the process and file probes

class LeaseTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-lease-run-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    spool_ = dir_ + "/spool";
    ASSERT_EQ(mkdir(spool_.c_str(), 0711), 0);
    Result<std::unique_ptr<LeaseFile>> f =
        LeaseFile::Open(spool_ + "/" + kLeaseFileName);  // the real clock: the waiters'
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    lease_ = std::move(*f);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A waiter of our own, as the launcher starts one, for `script` with a kill grace of
  // `grace_s`; its exit file is spool/exit-1.
  Spawned StartWaiter(const std::string& script, int grace_s) {
    exit_path_ = spool_ + "/exit-1";
    const int exit_fd =
        open(exit_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    EXPECT_GE(exit_fd, 0);
    SpawnRequest req;
    req.argv = {"/bin/sh", "-c", script};
    req.exec_paths = {"/bin/sh"};
    req.env = {{"PATH", "/usr/bin:/bin"}};
    req.workdir = dir_;
    req.stdout_path = req.stderr_path = dir_ + "/out";
    req.waiter = TestWaiterBinary();
    req.exit_fd = exit_fd;
    req.lease_fd = lease_->fd();
    req.lease_grace_s = grace_s;
    Result<Spawned> s = Spawn(req);
    close(exit_fd);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : Spawned{};
  }
  // The waiter's end, within `timeout`: its wait status, or -1.
  int WaitWaiter(const Spawned& w, milliseconds timeout) {
    pollfd p{w.pidfd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(timeout.count()));
    if (ready <= 0) kill(-w.pid, SIGKILL);  // do not leave it behind
    int status = 0;
    EXPECT_EQ(waitpid(w.pid, &status, 0), w.pid);
    close(w.pidfd);
    return ready > 0 ? status : -1;
  }
  ProcessLauncher::Options Options() const {
    ProcessLauncher::Options o;
    o.spool_dir = spool_;
    o.default_kill_grace = 1;
    o.waiter = TestWaiterBinary();
    o.lease_file = lease_;
    o.node = "n7";
    return o;
  }
  LaunchBuilder Job(JobId id) {
    return MakeLaunch(id).Workdir(dir_).Env("PATH", "/usr/bin:/bin").Grace(1);
  }

  std::string dir_, spool_, exit_path_;
  std::shared_ptr<LeaseFile> lease_;
};

// Nobody extends a lease 300 ms ahead: the job that ignores SIGTERM is killed after its
// grace, and the exit file says the lease stopped it.
TEST_F(LeaseTest, WaiterStopsItsJobWhenTheLeasePasses) {
  const std::string pidfile = dir_ + "/pid", terms = dir_ + "/terms";
  ASSERT_TRUE(lease_->HoldFor(300).ok());
  const auto start = Steady::now();
  Spawned w = StartWaiter("trap 'echo term >> " + terms + "' TERM; echo $$ > " + pidfile +
                              "; while :; do sleep 0.05; done",
                          /*grace_s=*/1);
  ASSERT_GT(w.pid, 0);
  const pid_t job = WaitPidFile(pidfile);
  ASSERT_GT(job, 0);
  const int status = WaitWaiter(w, milliseconds(8000));
  const double took = std::chrono::duration<double>(Steady::now() - start).count();
  ASSERT_NE(status, -1) << "the waiter did not stop its job";
  EXPECT_GE(took, 1.2) << "the deadline, then the whole grace";
  EXPECT_LT(took, 6.0);
  EXPECT_TRUE(WaitGone(job));
  EXPECT_NE(Slurp(terms).find("term"), std::string::npos) << "SIGTERM first";
  std::optional<WaitedStatus> e = ReadWaitedStatus(exit_path_);
  ASSERT_TRUE(e.has_value()) << Slurp(exit_path_);
  EXPECT_TRUE(e->signaled);
  EXPECT_EQ(e->code, SIGKILL);
  EXPECT_GE(e->lease_silent_ms, 300) << Slurp(exit_path_);
  // With its group: nothing of the job is left, the waiter included.
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

// A job that ends on SIGTERM ends at the deadline, without waiting for the grace.
TEST_F(LeaseTest, AJobThatHonoursSigtermEndsAtTheDeadline) {
  ASSERT_TRUE(lease_->HoldFor(300).ok());
  const auto start = Steady::now();
  Spawned w = StartWaiter("exec sleep 1000", /*grace_s=*/30);
  ASSERT_GT(w.pid, 0);
  ASSERT_NE(WaitWaiter(w, milliseconds(8000)), -1);
  EXPECT_LT(std::chrono::duration<double>(Steady::now() - start).count(), 5.0);
  std::optional<WaitedStatus> e = ReadWaitedStatus(exit_path_);
  ASSERT_TRUE(e.has_value()) << Slurp(exit_path_);
  EXPECT_TRUE(e->signaled);
  EXPECT_EQ(e->code, SIGTERM);
  EXPECT_GE(e->lease_silent_ms, 0);
}

// The agent extends the lease before each deadline: the job runs past the first ones,
// and is stopped only once the extensions stop.
TEST_F(LeaseTest, ExtendedDeadlinesKeepTheJobRunning) {
  constexpr milliseconds kLease(1500);
  const std::string pidfile = dir_ + "/pid";
  const auto start = Steady::now();
  ASSERT_TRUE(lease_->HoldFor(kLease.count()).ok());  // until 1.5 s
  Spawned w = StartWaiter("echo $$ > " + pidfile + "; exec sleep 1000", 1);
  ASSERT_GT(w.pid, 0);
  const pid_t job = WaitPidFile(pidfile);
  ASSERT_GT(job, 0);
  for (milliseconds at : {milliseconds(700), milliseconds(1400)}) {  // 2.2 s, 2.9 s
    std::this_thread::sleep_until(start + at);
    ASSERT_TRUE(lease_->HoldFor(kLease.count()).ok());
  }
  std::this_thread::sleep_until(start + milliseconds(2500));
  EXPECT_FALSE(ProcessGone(job)) << "stopped though its lease was extended";
  ASSERT_NE(WaitWaiter(w, milliseconds(10000)), -1);
  EXPECT_GE(Steady::now() - start, milliseconds(2900));
  std::optional<WaitedStatus> e = ReadWaitedStatus(exit_path_);
  ASSERT_TRUE(e.has_value()) << Slurp(exit_path_);
  EXPECT_EQ(e->code, SIGTERM);
  EXPECT_GE(e->lease_silent_ms, kLease.count()) << "silent since the last hold";
}

// An agent that never held a lease (older, or `hachi dev`): the job runs to its own
// end and its status is mirrored as before.
// The job itself never holds the lease file.
TEST_F(LeaseTest, NoLeaseHeldNeverStopsTheJob) {
  const std::string fds = dir_ + "/fds";
  Spawned w = StartWaiter("ls -l /proc/self/fd/ > " + fds + "; sleep 0.5; exit 3", 1);
  ASSERT_GT(w.pid, 0);
  const int status = WaitWaiter(w, milliseconds(8000));
  ASSERT_NE(status, -1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3);
  EXPECT_EQ(Slurp(exit_path_), "exit 3\n");
  const std::string open_files = Slurp(fds);
  EXPECT_NE(open_files.find("/proc/"), std::string::npos) << open_files;   // ls's own
  EXPECT_EQ(open_files.find("/spool/"), std::string::npos) << open_files;  // lease, exit
}

// The agent is there but cut off and did not stop the run itself: the waiter's stop is
// reported as lost all the same.
TEST_F(LeaseTest, WatchedRunStoppedOnTheLeaseIsLost) {
  Exits exits;
  ProcessLauncher launcher(Options(), exits.Callback());
  ASSERT_TRUE(lease_->HoldFor(300).ok());
  ASSERT_TRUE(launcher.Launch(Job(70).Start(3000).Sh("sleep 1000")).ok());
  std::optional<api::JobExit> e = exits.Wait(70, milliseconds(8000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kLost);
  EXPECT_EQ(e->start_time, 3000);
  EXPECT_EQ(e->signal, SIGTERM);
  EXPECT_EQ(e->message.rfind("lease expired: its agent on n7 was gone for ", 0), 0u)
      << e->message;
  EXPECT_NE(e->message.find("its job waiter stopped it"), std::string::npos);
}

// The agent died; a new one adopts the run before its lease passes, and reports the
// waiter's stop as lost.
TEST_F(LeaseTest, AdoptedRunStoppedOnTheLeaseIsLost) {
  const std::string pidfile = dir_ + "/pid";
  ASSERT_TRUE(lease_->HoldFor(1000).ok());
  Exits first;
  auto launcher = std::make_unique<ProcessLauncher>(Options(), first.Callback());
  ASSERT_TRUE(
      launcher->Launch(Job(71).Start(3001).Sh("echo $$ > " + pidfile + "; sleep 1000"))
          .ok());
  const pid_t job = WaitPidFile(pidfile);
  ASSERT_GT(job, 0);
  const pid_t waiter = getpgid(job);
  launcher.reset();  // the agent goes; the run goes on under its waiter
  Exits next_exits;
  ProcessLauncher next(Options(), next_exits.Callback());
  ASSERT_EQ(next.runs_adopted().size(), 1u);
  std::optional<api::JobExit> e = next_exits.Wait(71, milliseconds(8000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kLost);
  EXPECT_EQ(e->start_time, 3001);
  EXPECT_NE(e->message.find("lease expired: its agent on n7"), std::string::npos)
      << e->message;
  EXPECT_EQ(waitpid(waiter, nullptr, 0), waiter);  // as init would
  EXPECT_TRUE(WaitGone(job));
}

// The agent stayed away past the lease: the waiter stopped the run with nobody
// watching, and the agent that comes back reports it from the exit file as lost.
TEST_F(LeaseTest, RunStoppedWhileNoAgentWatchedIsLost) {
  const std::string pidfile = dir_ + "/pid";
  ASSERT_TRUE(lease_->HoldFor(300).ok());
  Exits first;
  auto launcher = std::make_unique<ProcessLauncher>(Options(), first.Callback());
  ASSERT_TRUE(
      launcher->Launch(Job(72).Start(3002).Sh("echo $$ > " + pidfile + "; sleep 1000"))
          .ok());
  const pid_t job = WaitPidFile(pidfile);
  ASSERT_GT(job, 0);
  const pid_t waiter = getpgid(job);
  launcher.reset();
  ASSERT_TRUE(WaitFor([&] { return waitpid(waiter, nullptr, WNOHANG) == waiter; },
                      milliseconds(8000)))
      << "the waiter did not stop its job on the lease";
  EXPECT_TRUE(WaitGone(job));
  Exits next_exits;
  ProcessLauncher next(Options(), next_exits.Callback());
  std::optional<api::JobExit> e = next_exits.Wait(72, milliseconds(5000));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kLost);
  EXPECT_EQ(e->start_time, 3002);
  EXPECT_NE(e->message.find("lease expired: its agent on n7"), std::string::npos)
      << e->message;
  EXPECT_FALSE(fs::exists(spool_ + "/run-72"));
  EXPECT_FALSE(fs::exists(spool_ + "/exit-72"));
}

// Not a test by default: how often an idle waiter wakes while its agent extends a 30 s
// lease every 5 s, over HACHI_LEASE_MEASURE_SECONDS (its voluntary context switches,
// /proc/PID/status).
TEST_F(LeaseTest, IdleWaiterWakeUps) {
  const char* env = std::getenv("HACHI_LEASE_MEASURE_SECONDS");
  if (env == nullptr || std::atoi(env) <= 0)
    GTEST_SKIP() << "HACHI_LEASE_MEASURE_SECONDS";
  const int seconds = std::atoi(env);
  ASSERT_TRUE(lease_->HoldFor(30'000).ok());
  Spawned w = StartWaiter("exec sleep 100000", 1);
  ASSERT_GT(w.pid, 0);
  auto switches = [&] {
    const std::string s = Slurp("/proc/" + std::to_string(w.pid) + "/status");
    const size_t at = s.find("voluntary_ctxt_switches:");
    return at == std::string::npos ? -1L : std::atol(s.c_str() + at + 24);
  };
  std::this_thread::sleep_for(milliseconds(500));  // past its start
  const long before = switches();
  const auto start = Steady::now();
  for (int t = 5; t <= seconds; t += 5) {
    std::this_thread::sleep_until(start + std::chrono::seconds(t));
    ASSERT_TRUE(lease_->HoldFor(30'000).ok());
  }
  std::this_thread::sleep_until(start + std::chrono::seconds(seconds));
  const long after = switches();
  std::cout << "[ lease ] idle waiter: " << (after - before) << " wake-ups in " << seconds
            << " s (" << (after - before) * 60.0 / seconds << " per minute)\n";
  kill(-w.pid, SIGKILL);
  WaitWaiter(w, milliseconds(5000));
}

}  // namespace
}  // namespace hachi::agent
