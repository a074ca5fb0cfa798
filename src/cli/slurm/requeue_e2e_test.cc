// Checkpoint and requeue as submitit does it (testdata/checkpointable.py: its signal
// handling and requeue, step for step), through sbatch, srun and scancel as a Slurm shop
// runs them, against a real `hachi dev` child: the scheduler's signal reaches the step's
// tasks and neither the batch shell (whose default action for USR2 is to exit, which
// ended the job FAILED) nor srun, both for the time-limit signal (--signal=USR2@T) and
// for a preemption's (scancel --signal=USR2); the job requeues itself twice and then
// completes. Once without cgroups (hachi dev's default) and once with the node's own
// (--cgroup auto, as an agent on a real node; root only).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "cli/cli_testing.h"
#include "cli/slurm/slurm_dev_testing.h"
#include "core/testing/paths.h"

namespace hachi::cli {
namespace {

using testing::ReadFile;
using testing::Shell;

class RequeueE2e : public testing::SlurmDevTest,
                   public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "none") {
      if (geteuid() != 0) GTEST_SKIP() << "--cgroup " << GetParam() << " needs root";
      if (access("/sys/fs/cgroup/cgroup.controllers", R_OK) != 0 &&
          access("/sys/fs/cgroup/memory", R_OK) != 0) {
        GTEST_SKIP() << "no cgroup hierarchy mounted";
      }
    }
    SlurmDevTest::SetUp();
    if (GetParam() != "none" &&
        ReadFile(dir_ + "/dev.log").find("job isolation: cgroup") == std::string::npos) {
      GTEST_SKIP() << "the agents found no cgroups to use: "
                   << ReadFile(dir_ + "/dev.log");
    }
  }
  // A requeued run is stopped with SIGTERM, which submitit's tasks bypass, and SIGKILL
  // after the grace: 2 s keeps each round short.
  std::string DevArgs() const override {
    return "--cgroup " + GetParam() + " --kill-grace 2";
  }
  // submitit's sbatch script: the parameters, then an srun of its runner (two tasks:
  // rank 0 checkpoints and requeues, rank 1 only logs the signal).
  std::string Script(const std::string& directives) {
    const std::string script = dir_ + "/job.sh";
    Shell("mkdir -p " + dir_ + "/ckpt");
    Shell("cat > " + script + " <<'EOF'\n#!/bin/bash\n# Parameters\n" + directives +
          "#SBATCH --ntasks-per-node=2\n#SBATCH --open-mode=append\n#SBATCH --output=" +
          dir_ + "/out.txt\n\n# command\nexport SUBMITIT_EXECUTOR=slurm\n" +
          "srun --unbuffered python3 -u " + SourceDir() +
          "/src/cli/slurm/testdata/checkpointable.py " + dir_ + "/ckpt 2\nEOF");
    return script;
  }
  std::string Submit(const std::string& script) {
    testing::CmdResult r = Run("sbatch --parsable " + script);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out.substr(0, r.out.find('\n'));
  }
  // Both tasks of run `n` (its SLURM_RESTART_COUNT) have set their handlers.
  bool Ready(int n) {
    return WaitFor(
        [&] {
          return access((dir_ + "/ckpt/ready-" + std::to_string(n) + "-0").c_str(),
                        F_OK) == 0 &&
                 access((dir_ + "/ckpt/ready-" + std::to_string(n) + "-1").c_str(),
                        F_OK) == 0;
        },
        std::chrono::seconds(60), std::chrono::milliseconds(50));
  }
  void ExpectRequeuedTwiceThenCompleted(const std::string& id) {
    ASSERT_TRUE(WaitState(id, "COMPLETED", 90000))
        << Run("sacct -j " + id).out << ReadFile(dir_ + "/out.txt");
    EXPECT_EQ(Run("sacct -X -P -n -o State,Restarts -j " + id).out, "COMPLETED|2\n");
    const std::string out = ReadFile(dir_ + "/out.txt");
    for (const char* line :
         {"rank 0: caught SIGUSR2", "rank 1: caught SIGUSR2", "rank 0: requeueing job",
          "rank 0: run 1 from ", "rank 0: run 2 from ", "rank 0: done after 2 requeues",
          "rank 1: done after 2 requeues"}) {
      EXPECT_NE(out.find(line), std::string::npos) << line << " in\n" << out;
    }
    // The checkpoint came back: the second run went on from where the first stopped.
    const std::string caught = "rank 0: caught SIGUSR2 at ";
    const size_t at = out.find(caught);
    ASSERT_NE(at, std::string::npos) << out;
    const std::string progress =
        out.substr(at + caught.size(), out.find('\n', at) - at - caught.size());
    EXPECT_NE(out.find("rank 0: run 1 from " + progress + "\n"), std::string::npos)
        << progress << " in\n"
        << out;
  }
};

TEST_P(RequeueE2e, TheTimeLimitSignalRequeuesACheckpointableJob) {
  // A 10 s limit, USR2 8 s before it: each run is signalled 2 s after its start.
  const std::string id = Submit(Script("#SBATCH --signal=USR2@8\n#SBATCH --time=0:10\n"));
  ExpectRequeuedTwiceThenCompleted(id);
}

TEST_P(RequeueE2e, APreemptionSignalRequeuesACheckpointableJob) {
  const std::string id = Submit(Script("#SBATCH --time=5\n"));
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(Ready(run)) << ReadFile(dir_ + "/out.txt") << Run("sacct -j " + id).out;
    // As a preemption's warning: scancel --signal without -b/--full, the steps' tasks.
    testing::CmdResult r = Run("scancel --signal=USR2 " + id);
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  ExpectRequeuedTwiceThenCompleted(id);
}

INSTANTIATE_TEST_SUITE_P(Cgroups, RequeueE2e, ::testing::Values("none", "auto"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param;
                         });

}  // namespace
}  // namespace hachi::cli
