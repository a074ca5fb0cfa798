// ProcessLauncher with real processes (DESIGN.md §4.7: the real OS boundary is tested
// on this machine too).
#include "agent/launcher.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/launcher_testing.h"
#include "agent/testing.h"
#include "core/testing/paths.h"

namespace hachi::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using testing_util::Exits;
using testing_util::ProcessGone;
using testing_util::Slurp;
using testing_util::WaitGone;
using testing_util::WaitPidFile;

class LauncherTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-agent-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0777);  // jobs run as nobody write here too
    launcher_ = std::make_unique<ProcessLauncher>(Options(), exits_.Callback());
  }
  // Every test runs its jobs under the job waiter, as `hachi agent` does.
  ProcessLauncher::Options Options() const {
    ProcessLauncher::Options o;
    o.spool_dir = dir_ + "/spool";
    o.default_kill_grace = 1;
    o.waiter = TestWaiterBinary();
    return o;
  }
  void TearDown() override {
    launcher_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  LaunchBuilder Job(JobId id) {
    return MakeLaunch(id)
        .Workdir(dir_)
        .Env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .Grace(1);
  }
  // Launches, waits for the one report, and checks it stays the only one.
  api::JobExit Run(const api::LaunchSpec& spec) {
    Status st = launcher_->Launch(spec);
    EXPECT_TRUE(st.ok()) << st.ToString();
    std::optional<api::JobExit> e = exits_.Wait(spec.job);
    EXPECT_TRUE(e.has_value()) << "job " << spec.job << " never reported";
    return e.value_or(api::JobExit{});
  }

  std::string dir_;
  Exits exits_;
  std::unique_ptr<ProcessLauncher> launcher_;
};

TEST_F(LauncherTest, EnvironmentMatchesAllocation) {
  api::JobExit e = Run(Job(11)
                           .Gpus({1, 3})
                           .Nodes({"n1", "n2"}, 1)
                           .Addresses({"10.1.0.1", "10.1.0.2"})
                           .Env("FOO", "bar baz")
                           .Out("env.txt")
                           .Sh("env"));
  EXPECT_EQ(e.kind, api::ExitKind::kExited) << e.message;
  EXPECT_EQ(e.exit_code, 0);
  const std::string out = Slurp(dir_ + "/env.txt");
  for (const char* line :
       {"CUDA_VISIBLE_DEVICES=1,3\n", "NVIDIA_VISIBLE_DEVICES=1,3\n", "HACHI_GPUS=1,3\n",
        "HACHI_JOB_ID=11\n", "SLURM_JOB_ID=11\n", "HACHI_NODENAME=n2\n",
        "HACHI_NODELIST=n1,n2\n", "NODE_RANK=1\n", "WORLD_SIZE=4\n",
        "MASTER_ADDR=10.1.0.1\n", "FOO=bar baz\n"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "in:\n" << out;
  }
}

// The NICs beside the job's GPUs reach it as NCCL_IB_HCA (nccl_env.h); a job that sets
// its own keeps it.
TEST_F(LauncherTest, NcclHcaOfTheGrantedGpus) {
  ProcessLauncher::Options o = Options();
  o.gpu_nics = {{"mlx5_0"}, {"mlx5_1"}, {"mlx5_2"}, {"mlx5_3"}};
  Exits exits;
  ProcessLauncher launcher(o, exits.Callback());
  ASSERT_TRUE(
      launcher.Launch(Job(12).Gpus({1, 3}).Out("a.txt").Sh("echo $NCCL_IB_HCA")).ok());
  ASSERT_TRUE(launcher
                  .Launch(Job(13)
                              .Gpus({0})
                              .Env("NCCL_IB_HCA", "mlx5_9")
                              .Out("b.txt")
                              .Sh("echo $NCCL_IB_HCA"))
                  .ok());
  ASSERT_TRUE(exits.Wait(12).has_value());
  ASSERT_TRUE(exits.Wait(13).has_value());
  EXPECT_EQ(Slurp(dir_ + "/a.txt"), "=mlx5_1,mlx5_3\n");
  EXPECT_EQ(Slurp(dir_ + "/b.txt"), "mlx5_9\n");
}

// A holder (an interactive allocation) is the waiter's own `__hold`: it blocks every
// signal and ends only by the launcher's SIGKILL, which the waiter mirrors. A holder the
// waiter program does not know ends at once with exit code 2 ("started by the agent
// only"), or by SIGTERM.
TEST_F(LauncherTest, HolderRunsUnderTheWaiterUntilKilled) {
  api::LaunchSpec spec = Job(90).Sh("exit 5");
  spec.spec.interactive = true;
  ASSERT_TRUE(launcher_->Launch(spec).ok());
  // A job of half a second beside it: a holder that cannot hold has ended by then.
  api::JobExit beside = Run(Job(91).Sh("sleep 0.5"));
  EXPECT_EQ(beside.exit_code, 0);
  EXPECT_EQ(exits_.Count(90), 0u) << "the holder ended by itself";
  launcher_->Cancel(90, "test");
  std::optional<api::JobExit> e = exits_.Wait(90);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->signal, SIGKILL) << e->message;
  EXPECT_EQ(e->exit_code, 0) << e->message;
}

struct ExitCase {
  std::string name;
  std::string sh;
  api::ExitKind kind;
  int code;
  int signal;
};

class LauncherExitTest : public LauncherTest,
                         public testing::WithParamInterface<ExitCase> {};

TEST_P(LauncherExitTest, Reports) {
  const ExitCase& c = GetParam();
  api::JobExit e = Run(Job(20).Sh(c.sh));
  EXPECT_EQ(e.kind, c.kind);
  EXPECT_EQ(e.exit_code, c.code);
  EXPECT_EQ(e.signal, c.signal);
  EXPECT_TRUE(e.message.empty()) << e.message;
  EXPECT_GT(e.end_time, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, LauncherExitTest,
    testing::Values(
        ExitCase{"zero", "exit 0", api::ExitKind::kExited, 0, 0},
        ExitCase{"three", "exit 3", api::ExitKind::kExited, 3, 0},
        ExitCase{"max", "exit 255", api::ExitKind::kExited, 255, 0},
        ExitCase{"sigkill", "kill -9 $$", api::ExitKind::kSignaled, 0, SIGKILL},
        ExitCase{"sigsegv", "kill -SEGV $$", api::ExitKind::kSignaled, 0, SIGSEGV},
        ExitCase{"sigpipe_default_restored", "kill -PIPE $$", api::ExitKind::kSignaled, 0,
                 SIGPIPE}),
    [](const testing::TestParamInfo<ExitCase>& row) { return row.param.name; });

// A launcher on a FakeClock: time limits and kill graces pass when the test says, and
// the supervisor acts on them at Tick().
class FakeTimeLauncherTest : public LauncherTest {
 protected:
  void SetUp() override {
    LauncherTest::SetUp();
    ProcessLauncher::Options o = Options();
    o.clock = &clock_;
    launcher_ = std::make_unique<ProcessLauncher>(o, exits_.Callback());
  }
  // Moves the clock by `d` and has the supervisor act on what is due.
  void Pass(milliseconds d) {
    clock_.Advance(d);
    launcher_->Tick();
  }
  // A job that appends a line to probe-<id> at each SIGUSR1 and otherwise waits (about
  // 30 s, in short sleeps, so that it answers at once); ready-<id> holds its pid once
  // the trap is set. `first` runs before (a trap of its own).
  LaunchBuilder Probed(JobId id, const std::string& first = "") {
    const std::string n = std::to_string(id);
    return Job(id).Sh(first + "trap 'echo p >> " + dir_ + "/probe-" + n +
                      "' USR1; echo $$ > " + dir_ + "/ready-" + n +
                      "; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done");
  }
  // A Probed job still runs after what the last Tick() decided: it answers a probe
  // sent now, which a SIGTERM (untrapped) or a SIGKILL sent before would have ended
  // it without answering.
  bool StillRunning(JobId id) {
    const std::string n = std::to_string(id);
    if (WaitPidFile(dir_ + "/ready-" + n) <= 0) return false;
    const int want = ++probes_[id];
    launcher_->Signal(id, SIGUSR1, /*batch_only=*/false);
    return WaitFor([&] { return Lines(dir_ + "/probe-" + n) >= want; }) &&
           exits_.Count(id) == 0;
  }
  static int Lines(const std::string& path) {
    const std::string text = Slurp(path);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

  FakeClock clock_;  // launcher_ is reset in TearDown, before this goes
  std::map<JobId, int> probes_;
};

TEST_F(FakeTimeLauncherTest, TimeLimitTermThenKillAfterGrace) {
  // Ignores SIGTERM (the sleeps inherit the ignore), so only the SIGKILL ends it.
  ASSERT_TRUE(launcher_->Launch(Probed(30, "trap '' TERM; ").TimeLimit(1, 1)).ok());
  ASSERT_GT(WaitPidFile(dir_ + "/ready-30"), 0);
  Pass(milliseconds(1000));  // the limit: SIGTERM, ignored
  Pass(milliseconds(999));
  EXPECT_TRUE(StillRunning(30)) << "killed before its grace was over";
  Pass(milliseconds(1));  // the grace is over: SIGKILL
  std::optional<api::JobExit> e = exits_.Wait(30);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kTimeLimit);
  EXPECT_EQ(e->signal, SIGKILL);
  EXPECT_EQ(e->end_time, clock_.Now()) << "the exit is stamped with the clock's time";
}

TEST_F(FakeTimeLauncherTest, TimeLimitTermIsEnoughForWellBehavedJobs) {
  ASSERT_TRUE(launcher_->Launch(Probed(31).TimeLimit(1, 5)).ok());
  Pass(milliseconds(999));
  EXPECT_TRUE(StillRunning(31)) << "stopped before its limit";
  Pass(milliseconds(1));
  std::optional<api::JobExit> e = exits_.Wait(31);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kTimeLimit);
  EXPECT_EQ(e->signal, SIGTERM);
}

// The limit counts from the server's start time (wall clock), not from the launch: a job
// launched a second late has a second less.
TEST_F(FakeTimeLauncherTest, TimeLimitCountsFromTheServersStartTime) {
  ASSERT_TRUE(launcher_->Launch(Probed(32).Start(clock_.Now() - 1).TimeLimit(3, 5)).ok());
  Pass(milliseconds(1999));
  EXPECT_TRUE(StillRunning(32)) << "stopped before its limit";
  Pass(milliseconds(1));
  std::optional<api::JobExit> e = exits_.Wait(32);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kTimeLimit);
  EXPECT_EQ(e->signal, SIGTERM);
}

// scontrol update TimeLimit= of a running job: the server's new limit counts
// from the same start; a shorter one already past stops the job at once.
TEST_F(FakeTimeLauncherTest, SetTimeLimitLengthensAndShortensTheRunning) {
  const Time start = clock_.Now();
  ASSERT_TRUE(launcher_->Launch(Probed(33).Start(start).TimeLimit(2, 5)).ok());
  launcher_->SetTimeLimit(33, start, 4);
  launcher_->SetTimeLimit(33, start + 1, 1);  // another run's: ignored
  Pass(milliseconds(3999));
  EXPECT_TRUE(StillRunning(33)) << "stopped at its old limit";
  Pass(milliseconds(1));
  std::optional<api::JobExit> e = exits_.Wait(33);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kTimeLimit);

  const Time start2 = clock_.Now();
  ASSERT_TRUE(launcher_->Launch(Probed(34).Start(start2).TimeLimit(600, 5)).ok());
  Pass(milliseconds(2000));
  EXPECT_TRUE(StillRunning(34));
  launcher_->SetTimeLimit(34, start2, 1);  // already past: stopped now
  launcher_->Tick();
  e = exits_.Wait(34);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kTimeLimit);
  EXPECT_EQ(e->signal, SIGTERM);
}

// The limit is what the server said was left, counted on the monotonic clock: an agent
// whose wall clock is an hour ahead (or behind) of the server's neither kills the job
// at once nor lets it run over.
TEST_F(FakeTimeLauncherTest, TheTimeLeftTheServerGaveCountsNotTheAgentsWallClock) {
  const Time server_start = clock_.Now() - 3600;  // this agent's clock is 1 h ahead
  ASSERT_TRUE(
      launcher_->Launch(Probed(35).Start(server_start).TimeLimit(60, 5).TimeLeft(2))
          .ok());
  Pass(milliseconds(1999));
  EXPECT_TRUE(StillRunning(35)) << "killed by the agent's own wall clock";
  Pass(milliseconds(1));
  std::optional<api::JobExit> e = exits_.Wait(35);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kTimeLimit);

  // And an update of the limit likewise (scontrol update TimeLimit=).
  const Time start = clock_.Now() + 3600;  // an hour behind
  ASSERT_TRUE(
      launcher_->Launch(Probed(36).Start(start).TimeLimit(60, 5).TimeLeft(60)).ok());
  launcher_->SetTimeLimit(36, start, 120, 3);
  Pass(milliseconds(2999));
  EXPECT_TRUE(StillRunning(36));
  Pass(milliseconds(1));
  e = exits_.Wait(36);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kTimeLimit);
}

TEST_F(LauncherTest, CancelKillsWholeProcessGroup) {
  const std::string pidfile = dir_ + "/grandchild.pid";
  ASSERT_TRUE(
      launcher_->Launch(Job(40).Sh("sleep 100 & echo $! > " + pidfile + "; wait")).ok());
  const pid_t grandchild = WaitPidFile(pidfile);
  ASSERT_GT(grandchild, 0);
  EXPECT_FALSE(ProcessGone(grandchild));
  EXPECT_EQ(launcher_->Running(), std::vector<JobId>{40});
  launcher_->Cancel(40, "by test");
  std::optional<api::JobExit> e = exits_.Wait(40);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kCancelled);
  EXPECT_TRUE(WaitGone(grandchild)) << grandchild;
  EXPECT_TRUE(launcher_->Running().empty());
}

TEST_F(FakeTimeLauncherTest, CancelEscalatesToSigkillAfterGrace) {
  ASSERT_TRUE(launcher_->Launch(Probed(41, "trap '' TERM; ").Grace(1)).ok());
  ASSERT_GT(WaitPidFile(dir_ + "/ready-41"), 0);
  launcher_->Cancel(41, "by test");
  Pass(milliseconds(500));
  launcher_->Cancel(41, "twice: no effect");  // in particular, no later SIGKILL
  Pass(milliseconds(499));
  EXPECT_TRUE(StillRunning(41)) << "killed before its grace was over";
  Pass(milliseconds(1));
  std::optional<api::JobExit> e = exits_.Wait(41);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kCancelled);
  EXPECT_EQ(e->signal, SIGKILL);
}

TEST_F(LauncherTest, DestructionFinishesCancelsAndLeavesOthersRunning) {
  const std::string ready = dir_ + "/ready", other = dir_ + "/other";
  ASSERT_TRUE(
      launcher_
          ->Launch(Job(44).Grace(1).Sh("trap '' TERM; echo $$ > " + ready + "; sleep 30"))
          .ok());
  ASSERT_TRUE(
      launcher_->Launch(Job(45).Sh("echo $$ > " + other + "; exec sleep 30")).ok());
  ASSERT_GT(WaitPidFile(ready), 0);
  const pid_t survivor = WaitPidFile(other);
  ASSERT_GT(survivor, 0);
  launcher_->Cancel(44, "agent stopping");
  launcher_.reset();  // waits out job 44's grace
  EXPECT_EQ(exits_.Count(44), 1u);
  EXPECT_EQ(exits_.Count(45), 0u);
  EXPECT_FALSE(ProcessGone(survivor));
  kill(-getpgid(survivor), SIGKILL);  // the group of its waiter
}

// An agent that died leaves its jobs running (own sessions); the next agent's launcher
// finds their records in the spool and stops them before anything else runs there, so
// their GPUs are not given twice. A record whose pid now names another process (reused)
// is not acted on; a job that ended leaves no record.
TEST_F(LauncherTest, NextLauncherStopsTheRunsTheLastOneLeft) {
  const std::string spool = dir_ + "/spool";
  EXPECT_EQ(Run(Job(40).Sh("true")).kind, api::ExitKind::kExited);
  EXPECT_FALSE(fs::exists(spool + "/run-40")) << "a reaped run leaves no record";
  const std::string pidfile = dir_ + "/main.pid";
  ASSERT_TRUE(
      launcher_->Launch(Job(46).Sh("echo $$ > " + pidfile + "; sleep 30 & wait")).ok());
  const pid_t main_pid = WaitPidFile(pidfile);
  ASSERT_GT(main_pid, 0);
  ASSERT_TRUE(fs::exists(spool + "/run-46"));
  launcher_.reset();  // the agent goes away; the job runs on
  EXPECT_FALSE(ProcessGone(main_pid));
  {  // a stale record naming this test process with another start time
    std::ofstream stale(spool + "/run-47");
    stale << "47 1700000000 " << getpid() << " 12345\n";
  }
  const pid_t waiter = getpgid(main_pid);  // the run's process: the job's waiter
  ProcessLauncher::Options o = Options();
  o.adopt = false;
  ProcessLauncher next(o, exits_.Callback());
  EXPECT_EQ(next.leftovers_stopped(),
            std::vector<std::string>{"job 46 (pid " + std::to_string(waiter) + ")"});
  EXPECT_TRUE(WaitGone(main_pid));
  EXPECT_FALSE(fs::exists(spool + "/run-46"));
  EXPECT_FALSE(fs::exists(spool + "/exit-46"));
  EXPECT_FALSE(fs::exists(spool + "/run-47"));
}

// With a job waiter the next launcher adopts what the last one left: a run still going is
// watched to its end and reported with its own exit code, its time limit still holds,
// cancel and signal reach it, and a run that ended while no launcher was there is
// reported from its exit file at once.
TEST_F(LauncherTest, NextLauncherAdoptsTheRunsTheLastOneLeft) {
  const std::string spool = dir_ + "/spool";
  const std::string go50 = dir_ + "/go50", go51 = dir_ + "/go51", p1 = dir_ + "/p1",
                    p2 = dir_ + "/p2", p3 = dir_ + "/p3", p4 = dir_ + "/p4";
  auto wait_for = [](const std::string& f) {
    return "while [ ! -e " + f + " ]; do sleep 0.05; done; ";
  };
  // 50: ends with 7 once told to, under the next launcher; 51: ends by SIGTERM while no
  // launcher watches; 52: time limit; 53: cancelled by the next launcher; 54: a script,
  // removed at the end.
  ASSERT_TRUE(launcher_
                  ->Launch(Job(50).Start(1000).Sh("echo $$ > " + p1 + "; " +
                                                  wait_for(go50) + "exit 7"))
                  .ok());
  ASSERT_TRUE(launcher_
                  ->Launch(Job(51).Start(1001).Sh("echo $$ > " + p2 + "; " +
                                                  wait_for(go51) + "kill -TERM $$"))
                  .ok());
  ASSERT_TRUE(
      launcher_->Launch(Job(52).TimeLimit(2, 1).Sh("echo $$ > " + p3 + "; sleep 30"))
          .ok());
  ASSERT_TRUE(
      launcher_->Launch(Job(53).Start(1003).Sh("echo $$ > " + p4 + "; sleep 30")).ok());
  ASSERT_TRUE(launcher_->Launch(Job(54).Script("#!/bin/sh\nsleep 1\nexit 4\n")).ok());
  for (const std::string& p : {p1, p2, p3, p4}) ASSERT_GT(WaitPidFile(p), 0) << p;
  const pid_t waiter51 = getpgid(WaitPidFile(p2));
  const auto start = Clock::now();
  launcher_.reset();  // the agent dies; its jobs do not
  EXPECT_EQ(exits_.Count(50) + exits_.Count(51) + exits_.Count(53), 0u);
  std::ofstream(go51).close();  // 51 ends with nobody watching: its waiter writes how
  // Init would reap an orphaned waiter; here the test process is still its parent.
  ASSERT_EQ(waitpid(waiter51, nullptr, 0), waiter51);
  EXPECT_FALSE(ProcessGone(WaitPidFile(p1)));

  Exits next_exits;
  ProcessLauncher next(Options(), next_exits.Callback());
  EXPECT_TRUE(next.leftovers_stopped().empty());
  std::vector<JobId> adopted;
  for (const auto& [job, start_time] : next.AdoptedRuns()) adopted.push_back(job);
  std::sort(adopted.begin(), adopted.end());
  EXPECT_EQ(adopted, (std::vector<JobId>{50, 51, 52, 53, 54}));
  EXPECT_EQ(next.runs_adopted().size(), 4u);  // still running: all but 51

  std::optional<api::JobExit> e51 = next_exits.Wait(51);
  ASSERT_TRUE(e51.has_value());
  EXPECT_EQ(e51->kind, api::ExitKind::kSignaled);
  EXPECT_EQ(e51->signal, SIGTERM);
  EXPECT_EQ(e51->start_time, 1001);
  // Delivered and gone from the launcher's queue, 51 is still one it adopted: the agent
  // asks after the launcher is built, and must not launch 51 again if the server resends.
  adopted.clear();
  for (const auto& [job, start_time] : next.AdoptedRuns()) adopted.push_back(job);
  std::sort(adopted.begin(), adopted.end());
  EXPECT_EQ(adopted, (std::vector<JobId>{50, 51, 52, 53, 54}));

  std::ofstream(go50).close();
  std::optional<api::JobExit> e50 = next_exits.Wait(50);
  ASSERT_TRUE(e50.has_value());
  EXPECT_EQ(e50->kind, api::ExitKind::kExited);
  EXPECT_EQ(e50->exit_code, 7);
  EXPECT_EQ(e50->start_time, 1000);

  next.Cancel(53, "by test");
  std::optional<api::JobExit> e53 = next_exits.Wait(53);
  ASSERT_TRUE(e53.has_value());
  EXPECT_EQ(e53->kind, api::ExitKind::kCancelled);
  EXPECT_TRUE(WaitGone(WaitPidFile(p4)));

  std::optional<api::JobExit> e52 = next_exits.Wait(52);
  ASSERT_TRUE(e52.has_value());
  EXPECT_EQ(e52->kind, api::ExitKind::kTimeLimit);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  // Its 30 s sleep was cut at 2 s + 1 s of grace (loose: a loaded machine is slow).
  EXPECT_LT(took, 10.0) << "the adopted run keeps its time limit";

  std::optional<api::JobExit> e54 = next_exits.Wait(54);
  ASSERT_TRUE(e54.has_value());
  EXPECT_EQ(e54->kind, api::ExitKind::kExited);
  EXPECT_EQ(e54->exit_code, 4);
  EXPECT_FALSE(fs::exists(spool + "/job-54.sh"));
  for (JobId id : {50, 51, 52, 53, 54}) {
    EXPECT_EQ(next_exits.Count(id), 1u) << id;
    EXPECT_FALSE(fs::exists(spool + "/run-" + std::to_string(id))) << id;
    EXPECT_FALSE(fs::exists(spool + "/exit-" + std::to_string(id))) << id;
  }
  EXPECT_TRUE(next.Running().empty());
}

// A run whose waiter was killed with the agent's whole process tree leaves no exit file:
// the next launcher reports it as lost rather than inventing a status.
TEST_F(LauncherTest, RunWithoutExitStatusIsReportedLost) {
  const std::string spool = dir_ + "/spool", pidfile = dir_ + "/p";
  ASSERT_TRUE(
      launcher_->Launch(Job(60).Start(2000).Sh("echo $$ > " + pidfile + "; sleep 30"))
          .ok());
  const pid_t job = WaitPidFile(pidfile);
  ASSERT_GT(job, 0);
  launcher_.reset();
  const pid_t waiter = getpgid(job);
  kill(-waiter, SIGKILL);                          // waiter and job die together
  ASSERT_EQ(waitpid(waiter, nullptr, 0), waiter);  // as init would
  Exits next_exits;
  ProcessLauncher next(Options(), next_exits.Callback());
  std::optional<api::JobExit> e = next_exits.Wait(60);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kLost);
  EXPECT_EQ(e->start_time, 2000);
  EXPECT_NE(e->message.find("no exit status"), std::string::npos) << e->message;
}

TEST_F(LauncherTest, LeftoversAreKilledWhenTheMainProcessExits) {
  const std::string pidfile = dir_ + "/bg.pid";
  api::JobExit e = Run(Job(42).Sh("sleep 100 & echo $! > " + pidfile));
  EXPECT_EQ(e.kind, api::ExitKind::kExited);
  const pid_t bg = WaitPidFile(pidfile);
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(WaitGone(bg));
}

TEST_F(LauncherTest, SignalReachesTheJob) {
  const std::string ready = dir_ + "/ready";
  ASSERT_TRUE(launcher_
                  ->Launch(Job(43).Sh("trap 'exit 7' USR1; echo $$ > " + ready +
                                      "; while :; do sleep 0.05; done"))
                  .ok());
  ASSERT_GT(WaitPidFile(ready), 0);
  launcher_->Signal(43, SIGUSR1, false);
  std::optional<api::JobExit> e = exits_.Wait(43);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kExited);
  EXPECT_EQ(e->exit_code, 7);
}

TEST_F(LauncherTest, OutputPatternsAndSeparateStderr) {
  api::JobExit e = Run(Job(50)
                           .Name("pat")
                           .Out("logs-%x-%j.out")
                           .Err("%j.err")
                           .Sh("echo to-out; echo to-err >&2"));
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_EQ(Slurp(dir_ + "/logs-pat-50.out"), "to-out\n");
  EXPECT_EQ(Slurp(dir_ + "/50.err"), "to-err\n");
  // Default file, both streams in one.
  Run(Job(51).Sh("echo one; echo two >&2"));
  EXPECT_EQ(Slurp(dir_ + "/hachi-51.out"), "one\ntwo\n");
  // Without the submitter's umask (a job sent through the API): the user's alone.
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/hachi-51.out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // With it (SLURM_UMASK, which sbatch and hachi submit send): as the submitter's shell
  // would have made it, for the output and for what the job creates.
  Run(Job(52).Env("SLURM_UMASK", "0027").Sh("echo x; touch made"));
  ASSERT_EQ(stat((dir_ + "/hachi-52.out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  ASSERT_EQ(stat((dir_ + "/made").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  Run(Job(53).Env("SLURM_UMASK", "0022").Sh("echo x"));
  ASSERT_EQ(stat((dir_ + "/hachi-53.out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // Nonsense reads as no umask at all.
  Run(Job(54).Env("SLURM_UMASK", "0999").Sh("echo x"));
  ASSERT_EQ(stat((dir_ + "/hachi-54.out").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

struct FailCase {
  std::string name;
  std::function<api::LaunchSpec(LaunchBuilder, const std::string& dir)> make;
  std::string message;  // "<dir>" is replaced by the test directory
};

class LauncherFailTest : public LauncherTest,
                         public testing::WithParamInterface<FailCase> {};

TEST_P(LauncherFailTest, ReportedOnceWithMessage) {
  const FailCase& c = GetParam();
  fs::create_directory(dir_ + "/ro");
  chmod((dir_ + "/ro").c_str(), 0555);
  {
    std::ofstream f(dir_ + "/notexec");
    f << "echo hi\n";
  }
  chmod((dir_ + "/notexec").c_str(), 0644);
  LaunchBuilder b = Job(60);
  // Root writes anywhere, so the permission rows run the job as nobody.
  if (geteuid() == 0) b.User("nobody", 65534, 65534);
  api::JobExit e = Run(c.make(b, dir_));
  std::string want = c.message;
  if (size_t at = want.find("<dir>"); at != std::string::npos) want.replace(at, 5, dir_);
  EXPECT_EQ(e.kind, api::ExitKind::kLaunchFailed);
  EXPECT_EQ(e.message, want);
  // Two supervisor rounds: whatever it reported by the first is delivered by the second.
  launcher_->Tick();
  launcher_->Tick();
  EXPECT_EQ(exits_.Count(60), 1u);
  EXPECT_TRUE(launcher_->Running().empty());
}

INSTANTIATE_TEST_SUITE_P(
    Rows, LauncherFailTest,
    testing::Values(
        FailCase{"no_such_command",
                 [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
                   return b.Argv({"nosuchcmd", "x"});
                 },
                 "exec nosuchcmd: No such file or directory"},
        FailCase{"no_such_path",
                 [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
                   return b.Argv({"/no/such/bin"});
                 },
                 "exec /no/such/bin: No such file or directory"},
        FailCase{"not_executable",
                 [](LaunchBuilder b, const std::string& d) -> api::LaunchSpec {
                   return b.Argv({d + "/notexec"});
                 },
                 "exec <dir>/notexec: Permission denied"},
        FailCase{
            "missing_workdir",
            [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
              return b.Workdir("/nonexistent/wd").Out("/tmp/x.out").Argv({"/bin/true"});
            },
            "cannot chdir to /nonexistent/wd: No such file or directory"},
        // A missing directory is made as the job's user; one they cannot make
        // fails the job naming the path (launcher_runtime_test.cc: the made ones).
        FailCase{"output_dir_not_makeable",
                 [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
                   return b.Out("ro/sub/%j.out").Argv({"/bin/true"});
                 },
                 "cannot create the directory of <dir>/ro/sub/60.out: Permission denied"},
        FailCase{"stderr_dir_not_makeable",
                 [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
                   return b.Err("ro/sub/err").Argv({"/bin/true"});
                 },
                 "cannot create the directory of <dir>/ro/sub/err: Permission denied"},
        FailCase{"unwritable_output_dir",
                 [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
                   return b.Out("ro/out").Argv({"/bin/true"});
                 },
                 "cannot open <dir>/ro/out: Permission denied"},
        FailCase{"unwritable_stderr",
                 [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
                   return b.Err("ro/err").Argv({"/bin/true"});
                 },
                 "cannot open <dir>/ro/err: Permission denied"},
        FailCase{"no_command",
                 [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
                   return b.Argv({});
                 },
                 "the job has no command"},
        FailCase{"container_without_runtime",
                 [](LaunchBuilder b, const std::string&) -> api::LaunchSpec {
                   return b.Image("alpine").Argv({"true"});
                 },
                 "job 60 asks for container image alpine but this agent has no container "
                 "runtime configured"}),
    [](const testing::TestParamInfo<FailCase>& row) { return row.param.name; });

struct ScriptCase {
  std::string name;
  std::string script;
  std::string want;
};

class LauncherScriptTest : public LauncherTest,
                           public testing::WithParamInterface<ScriptCase> {};

TEST_P(LauncherScriptTest, RunsWithArguments) {
  api::JobExit e = Run(Job(70).Script(GetParam().script).Argv({"a", "b c"}).Out("s.out"));
  EXPECT_EQ(e.kind, api::ExitKind::kExited) << e.message;
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_EQ(Slurp(dir_ + "/s.out"), GetParam().want);
  EXPECT_FALSE(fs::exists(dir_ + "/spool/job-70.sh"));  // removed at the end
}

INSTANTIATE_TEST_SUITE_P(
    Rows, LauncherScriptTest,
    testing::Values(
        ScriptCase{"shebang_sh", "#!/bin/sh\necho \"$#:$1:$2\"\n", "2:a:b c\n"},
        ScriptCase{"no_shebang", "echo \"$#:$1:$2\"\n", "2:a:b c\n"},
        ScriptCase{"shebang_env_bash",
                   "#!/usr/bin/env bash\necho \"${BASH_VERSION:+bash}:$1:$2\"\n",
                   "bash:a:b c\n"},
        ScriptCase{
            "shebang_sees_own_path",
            "#!/bin/sh\ncase \"$0\" in */job-70.sh) echo ok;; *) echo \"$0\";; esac\n",
            "ok\n"}),
    [](const testing::TestParamInfo<ScriptCase>& row) { return row.param.name; });

// On a job's first node the agent checks that MASTER_PORT is free before it starts
// anything: held by another process, the launch fails saying so. Only the rank-0 part
// of a job of more than one process checks (the others connect, they do not bind).
TEST_F(LauncherTest, MasterPortHeldOutsideHachiFailsTheRank0Launch) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int held = ntohs(addr.sin_port);  // a port some process outside Hachi holds
  struct Case {
    const char* name;
    api::LaunchSpec spec;
    bool fails;
  };
  const Case cases[] = {
      {"GangRank0", Job(91).Nodes({"n1", "n2"}, 0).MasterPort(held).Sh("true"), true},
      {"MultiGpuOneNode", Job(92).Gpus({0, 1}).MasterPort(held).Sh("true"), true},
      {"GangRank1", Job(93).Nodes({"n1", "n2"}, 1).MasterPort(held).Sh("true"), false},
      {"OneProcess", Job(94).Gpus({0}).MasterPort(held).Sh("true"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const api::JobExit e = Run(c.spec);
    if (c.fails) {
      EXPECT_EQ(e.kind, api::ExitKind::kLaunchFailed);
      EXPECT_EQ(e.message, "MASTER_PORT " + std::to_string(held) +
                               " is in use on n1 by a process outside Hachi");
      EXPECT_EQ(e.busy_port, held) << "the server places it again elsewhere";
    } else {
      EXPECT_EQ(e.kind, api::ExitKind::kExited) << e.message;
      EXPECT_EQ(e.exit_code, 0);
    }
  }
  close(fd);
  // Given back, the same port is free again: the gang's rank 0 starts.
  const api::JobExit e = Run(Job(95).Nodes({"n1", "n2"}, 0).MasterPort(held).Sh("true"));
  EXPECT_EQ(e.kind, api::ExitKind::kExited) << e.message;
}

TEST_F(LauncherTest, DuplicateLaunchRefused) {
  ASSERT_TRUE(launcher_->Launch(Job(80).Sh("sleep 30")).ok());
  Status st = launcher_->Launch(Job(80).Sh("true"));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  launcher_->Cancel(80, "done");
  ASSERT_TRUE(exits_.Wait(80).has_value());
  EXPECT_EQ(exits_.Count(80), 1u);
  launcher_->Cancel(12345, "unknown: a no-op");
  launcher_->Signal(12345, SIGTERM, false);
}

TEST_F(LauncherTest, TwoHundredConcurrentJobsEachReportedOnce) {
  constexpr int kJobs = 200;
  for (int i = 1; i <= kJobs; ++i) {
    ASSERT_TRUE(launcher_
                    ->Launch(Job(1000 + i)
                                 .Out("/dev/null")
                                 .Sh("sleep 0.3; exit " + std::to_string(i % 5)))
                    .ok());
  }
  EXPECT_GT(launcher_->Running().size(), 0u);
  ASSERT_TRUE(exits_.WaitAll(kJobs, milliseconds(15000)));
  launcher_->Tick();  // a second report of any job would be delivered by now
  launcher_->Tick();
  for (int i = 1; i <= kJobs; ++i) {
    ASSERT_EQ(exits_.Count(1000 + i), 1u) << i;
    std::optional<api::JobExit> e = exits_.Wait(1000 + i);
    EXPECT_EQ(e->kind, api::ExitKind::kExited);
    EXPECT_EQ(e->exit_code, i % 5) << i;
  }
  EXPECT_TRUE(launcher_->Running().empty());
}

TEST_F(LauncherTest, RunsAsTheUserWhenRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  api::JobExit e =
      Run(Job(90).User("nobody", 65534, 65534).Out("id.out").Sh("id -u; id -g"));
  EXPECT_EQ(e.kind, api::ExitKind::kExited) << e.message;
  EXPECT_EQ(Slurp(dir_ + "/id.out"), "65534\n65534\n");
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/id.out").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);  // opened as the user, after the switch
  // A script is the user's too, and readable by nobody else.
  e = Run(Job(91)
              .User("nobody", 65534, 65534)
              .Out("s.out")
              .Script("#!/bin/sh\nstat -c '%u %a' \"$0\"\n"));
  EXPECT_EQ(e.kind, api::ExitKind::kExited) << e.message;
  EXPECT_EQ(Slurp(dir_ + "/s.out"), "65534 700\n");
}

// The job's waiter runs as the job's uid and holds the exit file the agent
// opened as root; before, the job could take that descriptor with pidfd_getfd (or list
// and open /proc/$PPID/fd) and forge its status or fill the spool. The waiter is
// undumpable now: the job gets none of its descriptors, and its status still arrives.
TEST_F(LauncherTest, TheJobCannotTakeItsWaitersDescriptors) {
  const bool root = geteuid() == 0;
  LaunchBuilder job = Job(95).Out("thief.out").Sh(TestFdThiefBinary() + " $PPID; exit 3");
  if (root) job.User("nobody", 65534, 65534);  // else the test's own uid: the same risk
  api::JobExit e = Run(job);
  EXPECT_EQ(e.kind, api::ExitKind::kExited) << e.message;
  EXPECT_EQ(e.exit_code, 3) << e.message;
  const std::string out = Slurp(dir_ + "/thief.out");
  EXPECT_NE(out.find("taken=0 "), std::string::npos) << out;
  EXPECT_EQ(out.find("denied=0 "), std::string::npos) << "refused for a reason: " << out;
  EXPECT_NE(out.find("procfd=refused"), std::string::npos) << out;
}

// Not a timing assertion (the machine is shared): the figures, with the job waiter (as
// `hachi agent` runs jobs) and without it, measured in the same run.
TEST_F(LauncherTest, LaunchToExitLatencyOfBinTrue) {
  constexpr int kRuns = 200;
  auto measure = [&](ProcessLauncher& launcher, Exits& exits, JobId first) {
    std::vector<double> ms;
    for (int i = 0; i < kRuns; ++i) {
      const JobId id = first + i;
      const auto start = Clock::now();
      EXPECT_TRUE(launcher.Launch(Job(id).Out("/dev/null").Argv({"/bin/true"})).ok());
      EXPECT_TRUE(exits.Wait(id).has_value());
      ms.push_back(
          std::chrono::duration<double, std::milli>(exits.At(id) - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms;
  };
  const std::vector<double> waited = measure(*launcher_, exits_, 5000);
  ProcessLauncher::Options o = Options();
  o.waiter = "";
  o.spool_dir = dir_ + "/spool-direct";
  Exits direct_exits;
  ProcessLauncher direct(o, direct_exits.Callback());
  const std::vector<double> plain = measure(direct, direct_exits, 6000);
  for (const auto& [name, ms] : {std::pair{"with the job waiter", &waited},
                                 std::pair{"exec'd directly", &plain}}) {
    std::cout << "[ latency ] /bin/true launch-to-exit " << name << ", " << kRuns
              << " runs: median " << (*ms)[kRuns / 2] << " ms, p90 "
              << (*ms)[kRuns * 9 / 10] << " ms, max " << ms->back() << " ms\n";
  }
  std::cout << "[ latency ] median ratio waiter/direct: "
            << waited[kRuns / 2] / plain[kRuns / 2] << "\n";
  RecordProperty("median_ms", std::to_string(waited[kRuns / 2]));
  RecordProperty("median_direct_ms", std::to_string(plain[kRuns / 2]));
}

}  // namespace
}  // namespace hachi::agent
