// A `hachi dev` child (two simulated 8-GPU nodes) with Slurm's names installed in a temp
// bin/, for the end-to-end tests that drive it as a Slurm user does (slurm_e2e_test.cc,
// steps_e2e_test.cc). Test-only; not thread-safe.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::cli::testing {

class SlurmDevTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-slurm-e2e-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    const std::string log = dir_ + "/dev.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string cmd = BinaryDir() + "/hachi dev --state-dir " + dir_ +
                              "/state --listen 127.0.0.1:0 " + DevArgs() + " 2>" + log;
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
      ::_exit(127);
    }
    const bool up = WaitFor(
        [&] { return ReadFile(log).find("listening on http://") != std::string::npos; },
        std::chrono::seconds(5), std::chrono::milliseconds(50));
    ASSERT_TRUE(up) << ReadFile(log);
    ::setenv("HACHI_SERVER", ("unix:" + dir_ + "/state/hachi.sock").c_str(), 1);
    ASSERT_EQ(Shell("mkdir " + dir_ + "/bin").exit_code, 0);
    CmdResult links =
        Shell(BinaryDir() + "/hachi slurm install-links " + dir_ + "/bin 2>&1");
    ASSERT_EQ(links.exit_code, 0) << links.out;
    WaitFor([&] { return Run("sinfo -h -o %D").out.find('2') != std::string::npos; },
            std::chrono::seconds(5), std::chrono::milliseconds(50));
  }
  // More of `hachi dev`'s options (--cgroup, --kill-grace), for a fixture to choose.
  virtual std::string DevArgs() const { return ""; }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    Shell("rm -rf " + dir_);
  }
  // A command line run with the links first on PATH (exported, so that every command of
  // a pipeline and every job finds them), in the temp directory, stderr with stdout.
  CmdResult Run(const std::string& cmd) {
    return Shell("cd " + dir_ + " && export PATH=" + dir_ + "/bin:$PATH && " + cmd +
                 " 2>&1");
  }
  // Polls sacct until job `id` (its allocation line) is in `state`, for up to `ms`.
  bool WaitState(const std::string& id, const std::string& state, int ms = 30000) {
    return WaitFor(
        [&] {
          return Run("sacct -X -P -n -o State -j " + id).out.find(state) !=
                 std::string::npos;
        },
        std::chrono::milliseconds(ms), std::chrono::milliseconds(50));
  }

  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace hachi::cli::testing
