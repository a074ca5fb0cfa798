// A fast writer's output through the step relay (docs/steps.md, "The output relay"),
// end to end with real processes on `hachi dev`: every byte arrives, in order, through
// `hachi run` and through `srun` inside a batch job, also while the reader stalls (flow
// control holds the task back; nothing is dropped), and bytes that JSON text would blow
// up arrive exact without wedging the node's relay.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "cli/dev_testing.h"
#include "core/testing/paths.h"

namespace hachi::cli {
namespace {

using testing::Hachi;
using testing::ReadFile;
using testing::Shell;

// 20 MB of random bytes as base64: about 27 MB of output in lines, written as fast as
// the pipe takes it, with a copy of what was written in `copy`.
std::string FastWriter(const std::string& copy) {
  return "sh -c 'head -c 20000000 /dev/urandom | base64 | tee " + copy + "'";
}

// `got` holds exactly what the task wrote (`written`): compared without printing
// megabytes when it does not.
void ExpectWhole(const std::string& got, const std::string& written) {
  const std::string a = ReadFile(got), b = ReadFile(written);
  EXPECT_GT(b.size(), 27000000u) << written;
  EXPECT_EQ(a.size(), b.size()) << got;
  EXPECT_TRUE(a == b) << got << " differs from " << written;
}

class OutputE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-output-e2e-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    if (!HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  std::string dir_;
};

TEST_F(OutputE2e, AFastWritersOutputArrivesWholeThroughHachiRunAndSrun) {
  DevCluster dev(dir_, "--nodes 1");
  ASSERT_FALSE(dev.url().empty());
  const std::string hachi = BinaryDir() + "/hachi";

  // hachi run, its reader as fast as it can be.
  testing::CmdResult r = Shell(hachi + " run -G 1 -- " + FastWriter(dir_ + "/w1") + " >" +
                               dir_ + "/got1 2>" + dir_ + "/err1");
  EXPECT_EQ(r.exit_code, 0) << ReadFile(dir_ + "/err1");
  ExpectWhole(dir_ + "/got1", dir_ + "/w1");
  EXPECT_EQ(ReadFile(dir_ + "/err1").find("lost"), std::string::npos)
      << ReadFile(dir_ + "/err1");

  // A reader that stalls for two seconds first (its pipe full): the task waits for it.
  r = Shell(hachi + " run -G 1 -- " + FastWriter(dir_ + "/w2") + " 2>" + dir_ +
            "/err2 | { sleep 2; cat; } >" + dir_ + "/got2");
  EXPECT_EQ(r.exit_code, 0);
  ExpectWhole(dir_ + "/got2", dir_ + "/w2");
  EXPECT_EQ(ReadFile(dir_ + "/err2").find("lost"), std::string::npos)
      << ReadFile(dir_ + "/err2");

  // srun inside a batch job (this build's srun, ahead of any other on PATH).
  ASSERT_EQ(::mkdir((dir_ + "/bin").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(hachi.c_str(), (dir_ + "/bin/srun").c_str()), 0);
  const std::string script = dir_ + "/job.sh";
  std::ofstream(script) << "#!/bin/sh\n#SBATCH -G 1 -o " + dir_ +
                               "/job.out\nPATH=" + dir_ + "/bin:$PATH\nsrun " +
                               FastWriter(dir_ + "/w3") + " >" + dir_ +
                               "/got3\necho srun exited $?\n";
  r = Hachi("submit --parsable " + script, false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string id = std::to_string(std::atoll(r.out.c_str()));
  EXPECT_TRUE(WaitFor(
      [&] {
        return Hachi("queue -a -j " + id + " -o %T", false).out.find("COMPLETED") !=
               std::string::npos;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(200)))
      << Hachi("queue -a -j " + id).out;
  EXPECT_EQ(ReadFile(dir_ + "/job.out"), "srun exited 0\n");
  ExpectWhole(dir_ + "/got3", dir_ + "/w3");
}

// A task that writes control bytes: 1 MiB of NULs is over 6 MiB as JSON text (\u0000),
// past the server's 4 MiB body limit. Its output arrives exactly, and the relay of its
// node is not wedged: the next `hachi run` there ends at once. Each run is bounded (the
// relay used to send the refused report again forever, and every later step of the node
// waited behind it until its time limit).
TEST_F(OutputE2e, AMiBOfNulsArrivesExactlyAndHoldsUpNoLaterStep) {
  DevCluster dev(dir_, "--nodes 1");
  ASSERT_FALSE(dev.url().empty());
  const std::string run = "timeout -k 2 20 " + BinaryDir() + "/hachi run ";
  testing::CmdResult r =
      Shell(run + R"(-- sh -c 'head -c 1048576 /dev/zero; printf "\001\377end"' >)" +
            dir_ + "/got 2>" + dir_ + "/err");
  EXPECT_EQ(r.exit_code, 0) << ReadFile(dir_ + "/err");
  const std::string got = ReadFile(dir_ + "/got");
  EXPECT_EQ(got.size(), 1048576u + 5);
  EXPECT_TRUE(got == std::string(1048576, '\0') + "\001\377end") << "not byte-exact";
  EXPECT_EQ(ReadFile(dir_ + "/err").find("lost"), std::string::npos)
      << ReadFile(dir_ + "/err");

  const auto start = std::chrono::steady_clock::now();
  r = Shell(run + "-- true 2>" + dir_ + "/err2");
  EXPECT_EQ(r.exit_code, 0) << ReadFile(dir_ + "/err2");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace hachi::cli
