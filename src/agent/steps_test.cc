#include "agent/steps.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "api/protocol.h"
#include "api/protocol_json.h"
#include "core/clock.h"
#include "core/testing/wait_for.h"

namespace hachi::agent {
namespace {

using namespace std::chrono_literals;

// A server for the runner: takes every report (while `up`), up to `take` bytes of output
// per report when set (the rest held back, as the server does for a reader that is
// behind), acknowledges how far it took, and keeps what came per task and stream.
// Each batch goes through its JSON body, as on the wire: a body over the limit is
// refused (413), and so is a batch holding a report `refuse` picks (as a report the
// server's decoder refuses makes the whole body 400).
class FakeServer {
 public:
  Result<std::vector<api::StepAck>> Send(const std::vector<api::StepReport>& batch) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if (!up_) return Unavailable("server down");
    const std::string body = api::StepReportsToJson({"0123456789abcdef01234567", batch});
    most_body_ = std::max<int64_t>(most_body_, static_cast<int64_t>(body.size()));
    if (static_cast<int64_t>(body.size()) > body_limit_) {
      ++refused_;
      return InvalidArgument("request body too large: " + std::to_string(body.size()) +
                             " bytes; at most " + std::to_string(body_limit_));
    }
    Result<api::StepReports> decoded = api::StepReportsFromJson(body);
    EXPECT_TRUE(decoded.ok()) << decoded.status().message();
    if (!decoded.ok()) return decoded.status();
    const std::vector<api::StepReport>& reports = decoded->steps;
    for (const api::StepReport& r : reports) {
      if (refuse_ && refuse_(r)) {
        ++refused_;
        return InvalidArgument("step_reports.steps: step " + std::to_string(r.step) +
                               " refused");
      }
    }
    std::vector<api::StepAck> acks;
    for (const api::StepReport& r : reports) {
      int64_t& next = next_[r.step];
      EXPECT_EQ(r.seq, next) << "a report must start where the last one ended";
      int64_t offered = 0, budget = take_ < 0 ? INT64_MAX : take_;
      bool whole = true;
      for (const api::OutputChunk& c : r.chunks) {
        offered += static_cast<int64_t>(c.data.size());
        const int64_t n = std::min(c.size(), budget);
        budget -= n;
        whole = whole && n == c.size();
        next += n;
        if (c.lost > 0) {
          lost_[{c.task, c.fd}] += n;
        } else {
          out_[{c.task, c.fd}] += c.data.substr(0, static_cast<size_t>(n));
        }
      }
      most_offered_ = std::max(most_offered_, offered);
      if (!whole) ++held_back_;
      for (const api::TaskExit& e : r.exits) exits_[r.step][e.task] = e;
      if (r.done && whole) done_[r.step] = true;
      acks.push_back({r.job, r.job_start, r.step, next, gone_});
    }
    cv_.notify_all();
    return acks;
  }
  void SetUp(bool up) {
    std::lock_guard<std::mutex> lock(mu_);
    up_ = up;
  }
  // At most `bytes` of output taken per report; -1: all.
  void SetTake(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    take_ = bytes;
  }
  // Reports that offered more than the server took.
  int HeldBack() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_back_;
  }
  int Calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // The most output bytes one report offered.
  int64_t MostOffered() {
    std::lock_guard<std::mutex> lock(mu_);
    return most_offered_;
  }
  void SetBodyLimit(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    body_limit_ = bytes;
  }
  void SetRefuse(std::function<bool(const api::StepReport&)> refuse) {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_ = std::move(refuse);
  }
  // Batches refused (too large, or `refuse`).
  int Refused() {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_;
  }
  // The largest body a batch made.
  int64_t MostBody() {
    std::lock_guard<std::mutex> lock(mu_);
    return most_body_;
  }
  void SetGone(bool gone) {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = gone;
  }
  bool WaitDone(int step, std::chrono::milliseconds within) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, within, [&] { return done_[step]; });
  }
  std::string Out(int task, int fd = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    return out_[{task, fd}];
  }
  int64_t Lost(int task, int fd = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_[{task, fd}];
  }
  std::map<int, api::TaskExit> Exits(int step) {
    std::lock_guard<std::mutex> lock(mu_);
    return exits_[step];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool up_ = true;
  bool gone_ = false;
  int64_t take_ = -1;
  int64_t body_limit_ = INT64_MAX;
  std::function<bool(const api::StepReport&)> refuse_;
  int refused_ = 0;
  int64_t most_body_ = 0;
  int held_back_ = 0;
  int64_t most_offered_ = 0;
  int calls_ = 0;
  std::map<int, int64_t> next_;
  std::map<std::pair<int, int>, std::string> out_;
  std::map<std::pair<int, int>, int64_t> lost_;
  std::map<int, std::map<int, api::TaskExit>> exits_;
  std::map<int, bool> done_;
};

// `out` is `n` times `c` (without printing megabytes when it is not).
void ExpectRepeated(const std::string& out, size_t n, char c) {
  EXPECT_EQ(out.size(), n);
  EXPECT_EQ(out.find_first_not_of(c), std::string::npos);
}

constexpr state::JobId kJob = 7;
constexpr Time kStart = 1000;

StepContext Context() {
  StepContext c;
  c.spec.job = kJob;
  c.spec.start_time = kStart;
  c.spec.node = "n1";
  c.spec.nodelist = {"n1", "n2"};
  c.spec.gpus = GpuSet::FromIndices({2, 5});
  c.spec.cpus = 8;
  c.spec.spec.uid = ::getuid();
  c.spec.spec.gid = ::getgid();
  c.spec.spec.workdir = "/tmp";
  return c;
}

api::StepLaunch Step(int step, std::vector<std::string> argv, std::vector<int> tasks) {
  api::StepLaunch l;
  l.job = kJob;
  l.job_start = kStart;
  l.step = step;
  l.argv = std::move(argv);
  l.env = {{"PATH", "/usr/bin:/bin"}, {"FROM_SRUN", "yes"}};
  l.workdir = "/tmp";
  l.nodes = {"n0", "n1"};
  l.node_index = 1;
  l.tasks = tasks;
  l.ntasks = 4;
  l.tasks_per_node = {2, 2};
  l.kill_grace = 1;
  return l;
}

class StepRunnerTest : public ::testing::Test {
 protected:
  StepRunner::Options Opts() {
    StepRunner::Options o;
    o.node = "n1";
    return o;
  }
  // Reporting to `server` (outliving the runner), else to server_.
  std::unique_ptr<StepRunner> Make(StepRunner::Options o, bool job_runs = true,
                                   FakeServer* server = nullptr) {
    FakeServer* to = server != nullptr ? server : &server_;
    return std::make_unique<StepRunner>(
        o,
        [job_runs](state::JobId job, Time start) -> std::optional<StepContext> {
          if (!job_runs || job != kJob || start != kStart) return std::nullopt;
          return Context();
        },
        [to](const std::vector<api::StepReport>& r) { return to->Send(r); });
  }
  FakeServer server_;
};

TEST_F(StepRunnerTest, TasksGetTheirIdsAndOutputAndExitsComeBack) {
  auto runner = Make(Opts());
  runner->Launch(
      Step(0,
           {"/bin/sh", "-c",
            "echo rank=$SLURM_PROCID local=$SLURM_LOCALID node=$SLURM_NODEID "
            "ntasks=$SLURM_NTASKS step=$SLURM_STEP_ID gpus=$CUDA_VISIBLE_DEVICES "
            "from=$FROM_SRUN nodes=$SLURM_STEP_NODELIST; echo oops >&2; "
            "exit $SLURM_LOCALID"},
           {2, 3}));
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  EXPECT_EQ(server_.Out(2),
            "rank=2 local=0 node=1 ntasks=4 step=0 gpus=2,5 from=yes nodes=n[0-1]\n");
  EXPECT_EQ(server_.Out(3),
            "rank=3 local=1 node=1 ntasks=4 step=0 gpus=2,5 from=yes nodes=n[0-1]\n");
  EXPECT_EQ(server_.Out(2, 2), "oops\n");
  std::map<int, api::TaskExit> exits = server_.Exits(0);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[2].kind, api::ExitKind::kExited);
  EXPECT_EQ(exits[2].exit_code, 0);
  EXPECT_EQ(exits[3].exit_code, 1);
  EXPECT_TRUE(runner->WaitIdle(5000));
  EXPECT_TRUE(runner->Running().empty());
}

TEST_F(StepRunnerTest, GpusPerTaskGivesEachTaskItsOwn) {
  auto runner = Make(Opts());
  api::StepLaunch l = Step(0, {"/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"}, {2, 3});
  l.gpus_per_task = 1;
  runner->Launch(l);
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  EXPECT_EQ(server_.Out(2), "2\n");
  EXPECT_EQ(server_.Out(3), "5\n");
  // More than the node has: that task cannot start, the other runs.
  l.step = 1;
  l.gpus_per_task = 2;
  runner->Launch(l);
  ASSERT_TRUE(server_.WaitDone(1, 10s));
  std::map<int, api::TaskExit> exits = server_.Exits(1);
  EXPECT_EQ(exits[2].kind, api::ExitKind::kExited);
  EXPECT_EQ(exits[3].kind, api::ExitKind::kLaunchFailed);
  EXPECT_NE(exits[3].message.find("only 2 GPU(s) on n1"), std::string::npos)
      << exits[3].message;
}

TEST_F(StepRunnerTest, APartSentTwiceRunsOnce) {
  auto runner = Make(Opts());
  const api::StepLaunch l = Step(0, {"/bin/sh", "-c", "echo once"}, {2});
  runner->Launch(l);
  runner->Launch(l);
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  ASSERT_TRUE(runner->WaitIdle(5000));
  runner->Launch(l);  // after it ended, too: a launch taken would be running now
  EXPECT_TRUE(runner->Running().empty());
  EXPECT_EQ(server_.Out(2), "once\n");
}

// On a clock that never moves: the tasks end by the SIGTERM and the step with them,
// without waiting out a kill grace or a drain.
TEST_F(StepRunnerTest, CancelStopsTheTasks) {
  FakeClock clock;
  StepRunner::Options o = Opts();
  o.clock = &clock;
  auto runner = Make(o);
  runner->Launch(Step(0, {"/bin/sh", "-c", "echo up; exec /bin/sleep 30"}, {2, 3}));
  ASSERT_TRUE(
      WaitFor([&] { return server_.Out(2) == "up\n" && server_.Out(3) == "up\n"; }));
  runner->Signal({kJob, kStart, 0, 0, true});
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  std::map<int, api::TaskExit> exits = server_.Exits(0);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[2].kind, api::ExitKind::kCancelled);
  EXPECT_EQ(exits[2].signal, SIGTERM);
}

// A task that outlives the SIGTERM gets SIGKILL once its kill grace has passed on the
// runner's clock: an hour here, which the real clock would not pass within the test.
TEST_F(StepRunnerTest, CancelKillsAfterTheGraceOnTheRunnersClock) {
  FakeClock clock;
  StepRunner::Options o = Opts();
  o.clock = &clock;
  auto runner = Make(o);
  api::StepLaunch l = Step(0,
                           {"/bin/sh", "-c",
                            "trap 'echo term' TERM; trap 'echo alive' USR1; echo up; "
                            "while :; do sleep 0.05; done"},
                           {2});
  l.kill_grace = 3600;
  runner->Launch(l);
  ASSERT_TRUE(WaitFor([&] { return server_.Out(2) == "up\n"; }));
  runner->Signal({kJob, kStart, 0, 0, true});
  ASSERT_TRUE(WaitFor([&] { return server_.Out(2) == "up\nterm\n"; }));
  clock.Advance(3599s);
  runner->Tick();
  // Not killed at 3599 s: it still answers a signal sent after that round (a SIGKILL
  // sent before would have ended it first).
  runner->Signal({kJob, kStart, 0, SIGUSR1, false});
  ASSERT_TRUE(WaitFor([&] { return server_.Out(2) == "up\nterm\nalive\n"; }));
  clock.Advance(1s);
  runner->Tick();
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  std::map<int, api::TaskExit> exits = server_.Exits(0);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[2].kind, api::ExitKind::kCancelled);
  EXPECT_EQ(exits[2].signal, SIGKILL);
}

TEST_F(StepRunnerTest, ASignalReachesTheTasks) {
  auto runner = Make(Opts());
  runner->Launch(Step(
      0,
      {"/bin/sh", "-c",
       "trap 'echo got INT; exit 3' INT; echo trapped; while :; do sleep 0.05; done"},
      {2}));
  ASSERT_TRUE(WaitFor([&] { return server_.Out(2) == "trapped\n"; }));
  runner->Signal({kJob, kStart, 0, SIGINT, false});
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  EXPECT_EQ(server_.Out(2), "trapped\ngot INT\n");
  EXPECT_EQ(server_.Exits(0)[2].exit_code, 3);
}

// The child dies with the task's group, so its pipe closes at once: on a clock that
// never moves, the step ends without waiting out the drain.
TEST_F(StepRunnerTest, ABackgroundChildHoldingThePipeDoesNotHoldTheStep) {
  FakeClock clock;
  StepRunner::Options o = Opts();
  o.clock = &clock;
  auto runner = Make(o);
  runner->Launch(Step(0, {"/bin/sh", "-c", "sleep 30 & echo started"}, {2}));
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  EXPECT_EQ(server_.Out(2), "started\n");
}

// A process that left the task's group holds its pipe: the pipe is read after the
// task's exit, and closed once the drain has passed on the runner's clock.
TEST_F(StepRunnerTest, APipeHeldPastTheExitIsClosedAfterTheDrainOnTheRunnersClock) {
  FakeClock clock;
  StepRunner::Options o = Opts();
  o.clock = &clock;
  auto runner = Make(o);
  char tmpl[] = "/tmp/hachi-steps-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string ready = std::string(tmpl) + "/ready";
  // The task ends only once the holder has left its group (else the group's SIGKILL
  // at the task's exit could catch it before its setsid).
  runner->Launch(
      Step(0,
           {"/bin/sh", "-c",
            "setsid sh -c 'trap \"echo late\" USR1; echo holder $$; touch " + ready +
                "; i=0; while [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); "
                "done' & while [ ! -e " +
                ready + " ]; do sleep 0.01; done; echo started"},
           {2}));
  pid_t holder = 0;
  // The holder's group is its own (setsid), out of the runner's reach: ended here,
  // however the test ends.
  struct KillHolder {
    pid_t* pid;
    ~KillHolder() {
      if (*pid > 1) kill(-*pid, SIGKILL);
    }
  } kill_holder{&holder};
  ASSERT_TRUE(WaitFor([&] {
    const std::string out = server_.Out(2);
    const size_t at = out.find("holder ");
    if (at == std::string::npos || out.find('\n', at) == std::string::npos) return false;
    holder = static_cast<pid_t>(std::stol(out.substr(at + 7)));
    return !server_.Exits(0).empty();
  }));
  ASSERT_GT(holder, 1);
  EXPECT_EQ(server_.Exits(0)[2].kind, api::ExitKind::kExited);
  // Read after the exit: what the holder writes now still comes back.
  kill(holder, SIGUSR1);
  EXPECT_TRUE(
      WaitFor([&] { return server_.Out(2).find("late\n") != std::string::npos; }));
  clock.Advance(1s);
  runner->Tick();
  EXPECT_TRUE(server_.WaitDone(0, 10s));
  ::unlink(ready.c_str());
  ::rmdir(tmpl);
}

TEST_F(StepRunnerTest, LaunchFailuresAreReportedPerTask) {
  auto runner = Make(Opts());
  runner->Launch(Step(0, {"no-such-command-hachi"}, {2}));
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  api::TaskExit e = server_.Exits(0)[2];
  EXPECT_EQ(e.kind, api::ExitKind::kLaunchFailed);
  EXPECT_NE(e.message.find("No such file or directory"), std::string::npos) << e.message;
}

TEST_F(StepRunnerTest, AJobNotRunningHereFailsItsPart) {
  auto runner = Make(Opts(), /*job_runs=*/false);
  runner->Launch(Step(0, {"/bin/true"}, {0, 1}));
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  std::map<int, api::TaskExit> exits = server_.Exits(0);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].kind, api::ExitKind::kLaunchFailed);
  EXPECT_NE(exits[0].message.find("does not run on n1"), std::string::npos);
}

TEST_F(StepRunnerTest, AMissingWorkdirFallsBackToTmpAndSaysSo) {
  auto runner = Make(Opts());
  api::StepLaunch l = Step(0, {"/bin/pwd"}, {2});
  l.workdir = "/no/such/dir/hachi";
  runner->Launch(l);
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  EXPECT_EQ(server_.Out(2), "/tmp\n");
  EXPECT_NE(server_.Out(2, 2).find("couldn't chdir to `/no/such/dir/hachi'"),
            std::string::npos);
}

TEST_F(StepRunnerTest, AFullBufferHoldsTheTaskBackAndLosesNothing) {
  StepRunner::Options o = Opts();
  o.buffer_bytes = 64 * 1024;
  server_.SetTake(0);  // the reader is behind: the server takes nothing for a while
  auto runner = Make(o);
  char tmpl[] = "/tmp/hachi-steps-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string written = std::string(tmpl) + "/written";
  // 4 MiB, far past the bound, then a mark that it was all written.
  runner->Launch(
      Step(0,
           {"/bin/sh", "-c",
            "head -c 4194304 /dev/zero | tr '\\0' x; echo end >&2; touch " + written},
           {2}));
  // Refused six times (5 + 10 + ... + 80 ms apart): long enough for 4 MiB into a pipe
  // that is read, so a task that has not written it all waits on its write.
  ASSERT_TRUE(WaitFor([&] { return server_.HeldBack() >= 6; }));
  EXPECT_NE(::access(written.c_str(), F_OK), 0) << "the task was not held back";
  // Bounded: what a report offers is the buffer plus one round of reads.
  EXPECT_LE(server_.MostOffered(), o.buffer_bytes + 2 * 64 * 1024);
  // The reader catches up, slowly (less than a chunk a report): all of it arrives.
  server_.SetTake(40000);
  ASSERT_TRUE(server_.WaitDone(0, 30s));
  EXPECT_EQ(server_.Exits(0)[2].exit_code, 0);
  EXPECT_EQ(server_.Lost(2), 0);
  ExpectRepeated(server_.Out(2), 4194304, 'x');
  EXPECT_EQ(server_.Out(2, 2), "end\n");
  EXPECT_EQ(::access(written.c_str(), F_OK), 0);
  ::unlink(written.c_str());
  ::rmdir(tmpl);
}

// A task that exited while its step was held back: its pipes keep what they hold, and
// are drained once the server takes again, however long it took on the runner's clock.
TEST_F(StepRunnerTest, AHeldBackTasksPipesAreDrainedAfterItsExit) {
  FakeClock clock;
  StepRunner::Options o = Opts();
  o.clock = &clock;
  o.buffer_bytes = 64 * 1024;
  server_.SetTake(0);
  auto runner = Make(o);
  // 100 KiB: more than the buffer, less than the buffer and a pipe, so the task exits.
  runner->Launch(
      Step(0, {"/bin/sh", "-c", "head -c 102400 /dev/zero | tr '\\0' z"}, {2}));
  ASSERT_TRUE(WaitFor([&] { return server_.Exits(0).count(2) > 0; }));
  clock.Advance(std::chrono::seconds(5));  // far past the drain after the exit
  runner->Tick();
  server_.SetTake(-1);
  ASSERT_TRUE(server_.WaitDone(0, 30s));
  ExpectRepeated(server_.Out(2), 102400, 'z');
}

TEST_F(StepRunnerTest, OutputWaitsForAServerThatIsDown) {
  StepRunner::Options o = Opts();
  o.buffer_bytes = 64 * 1024;
  server_.SetUp(false);
  auto runner = Make(o);
  runner->Launch(
      Step(0, {"/bin/sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' y"}, {2}));
  // Refused twice: the output waits, whole, and goes once the server is back.
  ASSERT_TRUE(WaitFor([&] { return server_.Calls() >= 2; }));
  server_.SetUp(true);
  ASSERT_TRUE(server_.WaitDone(0, 30s));
  EXPECT_EQ(server_.Lost(2), 0);
  ExpectRepeated(server_.Out(2), 1048576, 'y');
}

// A temp directory for the files tasks touch to say how far they got.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hachi-steps-test-XXXXXX";
    path_ = ::mkdtemp(tmpl) != nullptr ? tmpl : "/tmp";
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Output the server could not take whole as text: 1 MiB of NULs is over 6 MiB as JSON
// escapes (\u0000), past the server's 4 MiB body limit. It all goes (as base64, in
// reports sized by their JSON), and the step beside it is not held up. The server is
// down until both steps have written everything, so the first batch holds it all.
TEST_F(StepRunnerTest, AMiBOfNulsGetsThroughUnderTheBodyLimitBesideAnotherStep) {
  TempDir dir;
  server_.SetBodyLimit(api::kMaxRequestBodyBytes);
  server_.SetUp(false);
  auto runner = Make(Opts());
  runner->Launch(
      Step(0,
           {"/bin/sh", "-c",
            "head -c 1048576 /dev/zero; printf '\\001\\377end'; touch " + dir / "0"},
           {2}));
  runner->Launch(Step(1, {"/bin/sh", "-c", "echo second; touch " + dir / "1"}, {3}));
  ASSERT_TRUE(WaitFor([&] {
    return ::access((dir / "0").c_str(), F_OK) == 0 &&
           ::access((dir / "1").c_str(), F_OK) == 0;
  }));
  server_.SetUp(true);
  EXPECT_TRUE(server_.WaitDone(1, 10s)) << "one step's output held up another's";
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  EXPECT_EQ(server_.Out(3), "second\n");
  EXPECT_TRUE(server_.Out(2) == std::string(1048576, '\0') + "\001\377end")
      << server_.Out(2).size() << " bytes";
  EXPECT_EQ(server_.Lost(2), 0);
  EXPECT_EQ(server_.Refused(), 0);
  EXPECT_LE(server_.MostBody(), Opts().batch_bytes);
}

// A chunk larger than a batch (the runner reads up to 128 KiB into one) is cut: every
// body stays under the bound, however small, and the bytes arrive as written.
TEST_F(StepRunnerTest, AChunkLargerThanTheBatchIsCut) {
  TempDir dir;
  StepRunner::Options o = Opts();
  o.batch_bytes = 64 * 1024;
  server_.SetBodyLimit(o.batch_bytes);
  server_.SetUp(false);
  auto runner = Make(o);
  runner->Launch(
      Step(0, {"/bin/sh", "-c", "head -c 1048576 /dev/zero; touch " + dir / "0"}, {2}));
  ASSERT_TRUE(WaitFor([&] { return ::access((dir / "0").c_str(), F_OK) == 0; }));
  server_.SetUp(true);
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  ExpectRepeated(server_.Out(2), 1048576, '\0');
  EXPECT_EQ(server_.Refused(), 0);
  EXPECT_LE(server_.MostBody(), o.batch_bytes);
}

// A launch failure's message quotes argv[0]: a megabyte of control bytes would be 6 MiB
// of JSON. The report clips it, and the step ends.
TEST_F(StepRunnerTest, AnExitQuotingAMegabyteIsClippedUnderTheLimit) {
  server_.SetBodyLimit(api::kMaxRequestBodyBytes);
  auto runner = Make(Opts());
  runner->Launch(Step(0, {std::string(1 << 20, '\x01')}, {2}));
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  const api::TaskExit e = server_.Exits(0)[2];
  EXPECT_EQ(e.kind, api::ExitKind::kLaunchFailed);
  EXPECT_LE(e.message.size(), 4096u + 3) << "clipped, marked \"...\"";
  EXPECT_EQ(server_.Refused(), 0);
}

// A report the server refuses for good (as it would a body it cannot decode) is not
// sent again and again in front of the others: the other step's output and end go
// through, and the refused step loses only what the server would not take.
TEST_F(StepRunnerTest, AReportTheServerRefusesBlocksNoOtherStep) {
  struct Case {
    const char* name;
    std::function<bool(const api::StepReport&)> refuse;
    bool refused_step_ends;  // its exit and end reach the server (its output lost)
  };
  const Case cases[] = {
      {"its output refused",
       [](const api::StepReport& r) {
         return r.step == 0 &&
                std::any_of(r.chunks.begin(), r.chunks.end(),
                            [](const api::OutputChunk& c) { return !c.data.empty(); });
       },
       true},
      {"every report of it refused", [](const api::StepReport& r) { return r.step == 0; },
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    FakeServer server;
    server.SetUp(false);
    server.SetRefuse(c.refuse);
    auto runner = Make(Opts(), true, &server);
    runner->Launch(Step(0, {"/bin/sh", "-c", "echo bad; touch " + dir / "0"}, {2}));
    runner->Launch(Step(1, {"/bin/sh", "-c", "echo good; touch " + dir / "1"}, {3}));
    ASSERT_TRUE(WaitFor([&] {
      return ::access((dir / "0").c_str(), F_OK) == 0 &&
             ::access((dir / "1").c_str(), F_OK) == 0;
    }));
    server.SetUp(true);
    EXPECT_TRUE(server.WaitDone(1, 10s)) << "the refused step held up the other";
    EXPECT_EQ(server.Out(3), "good\n");
    EXPECT_EQ(server.Out(2), "");
    if (c.refused_step_ends) {
      EXPECT_TRUE(server.WaitDone(0, 10s));
      EXPECT_EQ(server.Lost(2), 4) << "the dropped output is marked lost";
      EXPECT_EQ(server.Exits(0)[2].exit_code, 0);
    }
    // Given up or done, nothing of either is left to send: refused a few times, not on
    // and on.
    EXPECT_TRUE(runner->WaitIdle(10000));
    EXPECT_LE(server.Refused(), 4);
  }
}

TEST_F(StepRunnerTest, ServerGoneStopsTheStep) {
  auto runner = Make(Opts());
  server_.SetGone(true);
  runner->Launch(Step(0, {"/bin/sh", "-c", "echo hi; sleep 30"}, {2}));
  // The first report's answer says the step ended on the server: its task is killed.
  ASSERT_TRUE(runner->WaitIdle(10000));
}

TEST_F(StepRunnerTest, TasksGetTheJobsRlimits) {
  auto runner = std::make_unique<StepRunner>(
      Opts(),
      [](state::JobId, Time) -> std::optional<StepContext> {
        StepContext c = Context();
        rlimit nofile{};
        getrlimit(RLIMIT_NOFILE, &nofile);
        nofile.rlim_cur = 777;  // below any hard limit: no privilege needed
        c.rlimits.push_back({RLIMIT_NOFILE, nofile, nofile});
        return c;
      },
      [this](const std::vector<api::StepReport>& r) { return server_.Send(r); });
  runner->Launch(Step(0, {"/bin/sh", "-c", "ulimit -n"}, {2}));
  ASSERT_TRUE(server_.WaitDone(0, 10s));
  EXPECT_EQ(server_.Out(2), "777\n");
}

TEST_F(StepRunnerTest, OutputFilesPerTask) {
  char tmpl[] = "/tmp/hachi-steps-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto runner = Make(Opts());
  api::StepLaunch l =
      Step(3, {"/bin/sh", "-c", "echo out-$SLURM_PROCID; echo err >&2"}, {2, 3});
  l.stdout_pattern = dir + "/o-%j.%s.%t.txt";
  runner->Launch(l);
  ASSERT_TRUE(server_.WaitDone(3, 10s));
  for (int t : {2, 3}) {
    const std::string path = dir + "/o-7.3." + std::to_string(t) + ".txt";
    FILE* f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr) << path;
    char buf[64] = {};
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    EXPECT_EQ(std::string(buf, n), "out-" + std::to_string(t) + "\nerr\n");
    ::unlink(path.c_str());
  }
  ::rmdir(dir.c_str());
  EXPECT_EQ(server_.Out(2), "");
}

}  // namespace
}  // namespace hachi::agent
