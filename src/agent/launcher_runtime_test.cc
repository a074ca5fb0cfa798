// ProcessLauncher and the Slurm options that reach a running job: signals to
// every process or to the batch shell alone, --signal's pre-limit signal (on a fake
// clock, across an agent restart), --open-mode, and output directories made at launch.
// Real processes under the job waiter, as `hachi agent` runs them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "agent/launcher.h"
#include "agent/launcher_testing.h"
#include "agent/run_records.h"
#include "agent/spawn.h"
#include "agent/testing.h"
#include "core/clock.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing_util::Exits;
using testing_util::Slurp;
using testing_util::WaitPidFile;

// Lines in `path` (0 when it does not exist).
int Lines(const std::string& path) {
  const std::string text = Slurp(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Waits (real time) until `path` has at least `n` lines.
bool WaitLines(const std::string& path, int n,
               milliseconds timeout = milliseconds(5000)) {
  return WaitFor([&] { return Lines(path) >= n; }, timeout);
}

// A batch shell with a child process, each appending a line to its own file on
// SIGUSR1 ("shell", "child") and on SIGUSR2 ("shell_mark", "child_mark"); "ready" holds
// the shell's pid once all four traps are set.
std::string TwoProcessScript(const std::string& dir) {
  return "#!/bin/sh\n"
         "( trap 'echo child >> " +
         dir + "/child' USR1; trap 'echo mark >> " + dir +
         "/child_mark' USR2; echo x > " + dir +
         "/child_ready; while :; do sleep 0.05; done ) &\n"
         "trap 'echo shell >> " +
         dir + "/shell' USR1\n" + "trap 'echo mark >> " + dir + "/shell_mark' USR2\n" +
         "while [ ! -e " + dir +
         "/child_ready ]; do sleep 0.01; done\n"
         "echo $$ > " +
         dir + "/ready\n" + "while :; do sleep 0.05; done\n";
}

class RuntimeTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-runtime-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0777);
    launcher_ = std::make_unique<ProcessLauncher>(Options(), exits_.Callback());
  }
  void TearDown() override {
    launcher_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  virtual ProcessLauncher::Options Options() {
    ProcessLauncher::Options o;
    o.spool_dir = dir_ + "/spool";
    o.default_kill_grace = 1;
    o.waiter = TestWaiterBinary();
    return o;
  }
  LaunchBuilder Job(JobId id) {
    return MakeLaunch(id).Workdir(dir_).Env("PATH", "/usr/bin:/bin").Grace(1);
  }
  void Stop(JobId id) {
    launcher_->Cancel(id, "test over");
    ASSERT_TRUE(exits_.Wait(id).has_value());
  }
  // Sends SIGUSR2 to every process of job `id` and waits until both traps wrote their
  // mark: then every SIGUSR1 sent to either process before this call has been handled
  // and written its line (kill() makes a signal pending at once, and sh runs pending
  // traps in ascending signal order, SIGUSR1 before SIGUSR2). So a line that is not
  // there after Mark() was never sent: the later event a "nothing happened" check waits
  // for, instead of sleeping.
  bool Mark(JobId id) {
    ++marks_;
    launcher_->Signal(id, SIGUSR2, /*batch_only=*/false);
    return WaitLines(dir_ + "/shell_mark", marks_) &&
           WaitLines(dir_ + "/child_mark", marks_);
  }

  std::string dir_;
  int marks_ = 0;
  Exits exits_;
  std::unique_ptr<ProcessLauncher> launcher_;
};

TEST_F(RuntimeTest, SignalReachesEveryProcessOfTheJob) {
  ASSERT_TRUE(launcher_->Launch(Job(1).Script(TwoProcessScript(dir_))).ok());
  ASSERT_GT(WaitPidFile(dir_ + "/ready"), 0);
  launcher_->Signal(1, SIGUSR1, /*batch_only=*/false);
  EXPECT_TRUE(WaitLines(dir_ + "/shell", 1));
  EXPECT_TRUE(WaitLines(dir_ + "/child", 1));
  Stop(1);
}

TEST_F(RuntimeTest, BatchOnlySignalReachesTheBatchShellAlone) {
  ASSERT_TRUE(launcher_->Launch(Job(2).Script(TwoProcessScript(dir_))).ok());
  ASSERT_GT(WaitPidFile(dir_ + "/ready"), 0);
  launcher_->Signal(2, SIGUSR1, /*batch_only=*/true);
  EXPECT_TRUE(WaitLines(dir_ + "/shell", 1));
  ASSERT_TRUE(Mark(2));
  EXPECT_EQ(Lines(dir_ + "/child"), 0) << "the child got a batch-only signal";
  EXPECT_EQ(exits_.Count(2), 0u) << "the waiter must not take the job's signal";
  Stop(2);
}

// --signal=B:USR1@5 with a 10 s limit: sent at 5 s on the launcher's clock, once.
class PreLimitSignalTest : public RuntimeTest {
 protected:
  ProcessLauncher::Options Options() override {
    ProcessLauncher::Options o = RuntimeTest::Options();
    o.clock = &clock_;
    o.signal_steps = [this](JobId job, int sig) {
      std::lock_guard<std::mutex> lock(steps_mu_);
      step_signals_.emplace_back(job, sig);
    };
    return o;
  }
  std::vector<std::pair<JobId, int>> StepSignals() {
    std::lock_guard<std::mutex> lock(steps_mu_);
    return step_signals_;
  }
  void Pass(milliseconds d) {
    clock_.Advance(d);
    launcher_->Tick();
  }
  LaunchBuilder Warned(JobId id, bool batch_only) {
    return Job(id)
        .Start(clock_.Now())
        .TimeLimit(10, 1)
        .Signal(SIGUSR1, 5, batch_only)
        .Script(TwoProcessScript(dir_));
  }
  FakeClock clock_;  // declared before use; launchers are reset in TearDown first
  std::mutex steps_mu_;
  std::vector<std::pair<JobId, int>> step_signals_;  // what went to the StepRunner
};

TEST_F(PreLimitSignalTest, SentTimeBeforeTheLimitAndOnlyOnce) {
  ASSERT_TRUE(launcher_->Launch(Warned(3, /*batch_only=*/true)).ok());
  ASSERT_GT(WaitPidFile(dir_ + "/ready"), 0);
  Pass(milliseconds(4999));
  ASSERT_TRUE(Mark(3));
  EXPECT_EQ(Lines(dir_ + "/shell"), 0) << "sent before limit - 5 s";
  Pass(milliseconds(1));
  EXPECT_TRUE(WaitLines(dir_ + "/shell", 1)) << "not sent at limit - 5 s";
  Pass(milliseconds(4000));
  Pass(milliseconds(900));
  ASSERT_TRUE(Mark(3));
  EXPECT_EQ(Lines(dir_ + "/shell"), 1) << "sent twice";
  EXPECT_EQ(Lines(dir_ + "/child"), 0) << "B: reaches the batch shell alone";
  EXPECT_EQ(exits_.Count(3), 0u);
  Pass(milliseconds(100));  // the limit itself: SIGTERM as ever
  std::optional<api::JobExit> e = exits_.Wait(3);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kTimeLimit);
}

// Slurm's --signal without B: for the tasks of the job's steps, which the StepRunner
// runs: none of the launcher's processes (the batch shell, whose default action for
// USR1 is to exit, and what it started, srun among them) gets it.
TEST_F(PreLimitSignalTest, WithoutBGoesToTheStepsAlone) {
  ASSERT_TRUE(launcher_->Launch(Warned(4, /*batch_only=*/false)).ok());
  ASSERT_GT(WaitPidFile(dir_ + "/ready"), 0);
  Pass(milliseconds(4999));
  ASSERT_TRUE(Mark(4));
  EXPECT_TRUE(StepSignals().empty()) << "sent before limit - 5 s";
  Pass(milliseconds(1));
  ASSERT_TRUE(WaitFor([&] { return !StepSignals().empty(); }));
  EXPECT_EQ(StepSignals(), (std::vector<std::pair<JobId, int>>{{4, SIGUSR1}}));
  ASSERT_TRUE(Mark(4));
  EXPECT_EQ(Lines(dir_ + "/shell"), 0) << "the batch shell got it";
  EXPECT_EQ(Lines(dir_ + "/child"), 0) << "the shell's child got it";
  Stop(4);
}

// A run's record keeps its --signal's scope by number: an earlier agent's records (0 for
// every process, 1 for the batch shell) read as they meant, the steps' scope as 2.
TEST(RunRecordTest, TheSignalsScopeReadsBackAsWritten) {
  const std::string base = "v3 12 1700000000 345 678 1700003600 30 1 10 1700003510 ";
  const std::pair<std::string, api::SignalScope> rows[] = {
      {"0", api::SignalScope::kAll},
      {"1", api::SignalScope::kBatch},
      {"2", api::SignalScope::kSteps},
  };
  for (const auto& [scope, want] : rows) {
    std::optional<RunRecord> r = ParseRunRecord(base + scope + " 0 -\n");
    ASSERT_TRUE(r.has_value()) << scope;
    EXPECT_EQ(r->scope, want) << scope;
    EXPECT_EQ(r->signal, 10);
  }
  char tmpl[] = "/tmp/hachi-runrec-XXXXXX";
  const std::string spool = mkdtemp(tmpl);
  RunRecord w;
  w.job = 12;
  w.pid = 345;
  w.signal = SIGUSR2;
  w.signal_at = 1700003510;
  w.scope = api::SignalScope::kSteps;
  WriteRunRecord(spool, w);
  std::ifstream in(RunRecordPath(spool, 12));
  std::stringstream text;
  text << in.rdbuf();
  std::optional<RunRecord> back = ParseRunRecord(text.str());
  ASSERT_TRUE(back.has_value()) << text.str();
  EXPECT_EQ(back->scope, api::SignalScope::kSteps);
  std::filesystem::remove_all(spool);
}

// An agent restart neither repeats a signal sent nor loses one still due: the run's
// record in the spool says which.
TEST_F(PreLimitSignalTest, AgentRestartNeitherRepeatsNorLosesIt) {
  ASSERT_TRUE(launcher_->Launch(Warned(5, /*batch_only=*/true)).ok());
  ASSERT_GT(WaitPidFile(dir_ + "/ready"), 0);
  Pass(milliseconds(6000));
  ASSERT_TRUE(WaitLines(dir_ + "/shell", 1));
  launcher_.reset();  // the agent stops; the job runs on under its waiter
  launcher_ = std::make_unique<ProcessLauncher>(Options(), exits_.Callback());
  ASSERT_EQ(launcher_->Running(), std::vector<JobId>{5});
  Pass(milliseconds(1000));
  ASSERT_TRUE(Mark(5));
  EXPECT_EQ(Lines(dir_ + "/shell"), 1) << "the restarted agent sent it again";
  Stop(5);
}

TEST_F(PreLimitSignalTest, AgentRestartBeforeTheSignalStillSendsIt) {
  ASSERT_TRUE(launcher_->Launch(Warned(6, /*batch_only=*/true)).ok());
  ASSERT_GT(WaitPidFile(dir_ + "/ready"), 0);
  Pass(milliseconds(2000));
  launcher_.reset();  // the agent stops before the signal is due
  launcher_ = std::make_unique<ProcessLauncher>(Options(), exits_.Callback());
  Pass(milliseconds(2999));
  ASSERT_TRUE(Mark(6));
  EXPECT_EQ(Lines(dir_ + "/shell"), 0) << "early after the restart";
  Pass(milliseconds(1));
  EXPECT_TRUE(WaitLines(dir_ + "/shell", 1)) << "lost with the restart";
  Stop(6);
}

// A limit shorter than TIME: the signal goes at once, as Slurm's does. It may reach
// the shell before its trap is set (and end it): either way it arrived without the
// clock moving.
TEST_F(PreLimitSignalTest, LimitShorterThanTimeSignalsAtOnce) {
  ASSERT_TRUE(launcher_
                  ->Launch(Job(7)
                               .Start(clock_.Now())
                               .TimeLimit(3, 1)
                               .Signal(SIGUSR1, 60, true)
                               .Script(TwoProcessScript(dir_)))
                  .ok());
  Pass(milliseconds(0));
  // Whichever comes first: the shell's end by the signal, or its trap's line.
  ASSERT_TRUE(
      WaitFor([&] { return exits_.Count(7) > 0 || Lines(dir_ + "/shell") >= 1; }));
  if (exits_.Count(7) > 0) {
    std::optional<api::JobExit> e = exits_.Wait(7);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, api::ExitKind::kSignaled);
    EXPECT_EQ(e->signal, SIGUSR1);
  } else {
    Stop(7);
  }
}

TEST_F(RuntimeTest, OpenModeTruncateByDefaultAppendWhenAsked) {
  {
    std::ofstream(dir_ + "/t.out") << "old\n";
    std::ofstream(dir_ + "/a.out") << "old\n";
  }
  ASSERT_TRUE(launcher_->Launch(Job(8).Out("t.out").Sh("echo new")).ok());
  ASSERT_TRUE(exits_.Wait(8).has_value());
  EXPECT_EQ(Slurp(dir_ + "/t.out"), "new\n");
  ASSERT_TRUE(launcher_->Launch(Job(9).Out("a.out").Append().Sh("echo new")).ok());
  ASSERT_TRUE(exits_.Wait(9).has_value());
  EXPECT_EQ(Slurp(dir_ + "/a.out"), "old\nnew\n");
  // A gang's part appends: its other nodes write the same file.
  api::LaunchSpec part = Job(11).Out("a.out").Sh("echo rank1");
  part.nodelist = {"n1", "n2"};
  part.node_rank = 1;
  ASSERT_TRUE(launcher_->Launch(part).ok());
  ASSERT_TRUE(exits_.Wait(11).has_value());
  EXPECT_EQ(Slurp(dir_ + "/a.out"), "old\nnew\nrank1\n");
}

// submitit's race: the job starts before the directory of its %j path exists. The
// launcher makes it, as the job's user, 0755.
TEST_F(RuntimeTest, MissingOutputDirectoriesAreMadeAsTheUser) {
  LaunchBuilder b =
      Job(10).Out("logs/10/%j_0_log.out").Err("errs/%j.err").Sh("echo out; echo err >&2");
  b.Env("SLURM_UMASK", "0022");  // the submitter's, as sbatch sends it
  const bool root = geteuid() == 0;
  if (root) b.User("nobody", 65534, 65534);
  ASSERT_TRUE(launcher_->Launch(b).ok());
  std::optional<api::JobExit> e = exits_.Wait(10);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, api::ExitKind::kExited) << e->message;
  EXPECT_EQ(Slurp(dir_ + "/logs/10/10_0_log.out"), "out\n");
  EXPECT_EQ(Slurp(dir_ + "/errs/10.err"), "err\n");
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/logs/10").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_EQ(st.st_uid, root ? 65534u : geteuid()) << "made as the job's user";
}

// A step's workdir is entered as the task's user: where it cannot (missing, or behind
// a directory the user may not search), the task goes to /tmp saying why, and the
// answer is what the user's own `cd` would say — root's view of the file system never
// shows through.
TEST_F(RuntimeTest, AStepsWorkdirIsTriedAsItsUserAndFallsBackToTmp) {
  const bool root = geteuid() == 0;
  const std::string hidden = dir_ + "/private";
  fs::create_directories(hidden + "/there");
  ::chmod(hidden.c_str(), 0700);
  struct Row {
    std::string workdir;
    std::string reason;  // what the note says; "" = entered
  } rows[] = {
      {dir_, ""},
      {dir_ + "/missing", "No such file or directory"},
      // Root could enter it; the task's user cannot even see whether it is there.
      {hidden + "/there", root ? "Permission denied" : ""},
      {hidden + "/not-there", root ? "Permission denied" : "No such file or directory"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.workdir);
    int err[2];
    ASSERT_EQ(::pipe2(err, O_CLOEXEC), 0);
    SpawnRequest req;
    req.argv = {"/bin/sh", "-c", "pwd >&2"};
    req.exec_paths = {"/bin/sh"};
    req.workdir = r.workdir;
    req.workdir_fallback = "/tmp";
    req.workdir_note = "hachi: n1: couldn't chdir to `" + r.workdir + "': ";
    req.stdout_path = "/dev/null";
    req.stderr_fd = err[1];
    if (root) {
      req.switch_user = true;
      req.uid = req.gid = 65534;
    }
    Result<Spawned> child = Spawn(req);
    ::close(err[1]);
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    std::string got;
    char buf[512];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) {
      got.append(buf, static_cast<size_t>(n));
    }
    ::close(err[0]);
    ::waitpid(child->pid, nullptr, 0);
    ::close(child->pidfd);
    if (r.reason.empty()) {
      EXPECT_EQ(got, r.workdir + "\n");
    } else {
      EXPECT_EQ(got, req.workdir_note + r.reason + ": going to /tmp instead\n/tmp\n");
    }
  }
}

}  // namespace
}  // namespace hachi::agent
