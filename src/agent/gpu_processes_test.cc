// Which job a GPU process belongs to, from a /proc tree the test writes (and once from
// the real /proc, for this very process).
#include "agent/gpu_processes.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/testing/wait_for.h"

namespace hachi::agent {
namespace {

namespace fs = std::filesystem;

class FakeProc : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-proc-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  // A process: its cgroup file, environment (NUL-separated) and command line.
  void Process(unsigned pid, const std::string& cgroup, const std::string& environ,
               const std::string& cmdline, unsigned uid = 0) {
    const std::string dir = root_ + "/" + std::to_string(pid);
    fs::create_directories(dir);
    std::ofstream(dir + "/cgroup") << cgroup;
    std::ofstream(dir + "/environ", std::ios::binary) << environ;
    std::ofstream(dir + "/cmdline", std::ios::binary) << cmdline;
    std::ofstream(dir + "/status")
        << "Name:\tx\nUid:\t" << uid << "\t" << uid << "\t" << uid << "\t" << uid << "\n";
  }
  std::string root_;
};

struct JobCase {
  std::string name;
  std::string cgroup;
  std::string environ;
  state::JobId want;
};

class JobOfProcessTest : public FakeProc, public testing::WithParamInterface<JobCase> {};

TEST_P(JobOfProcessTest, Finds) {
  const JobCase& c = GetParam();
  Process(100, c.cgroup, c.environ, std::string("python\0train.py\0", 16));
  EXPECT_EQ(JobOfProcess(100, root_), c.want);
}

const std::string kEnv12 = std::string("PATH=/bin\0HACHI_JOB_ID=12\0HOME=/root\0", 38);

INSTANTIATE_TEST_SUITE_P(
    Rows, JobOfProcessTest,
    testing::Values(
        JobCase{"v2_cgroup", "0::/hachi/job-7\n", "", 7},
        JobCase{"v1_nested_under_the_agent",
                "12:pids:/system.slice/hachi/job-9\n4:memory:/system.slice/hachi/job-9\n",
                "", 9},
        JobCase{"cgroup_wins_over_environment", "0::/hachi/job-7\n", kEnv12, 7},
        JobCase{"environment_without_cgroup", "0::/user.slice\n", kEnv12, 12},
        JobCase{"another_parent_is_not_ours", "0::/kubepods/job-7\n", "", 0},
        JobCase{"job_dir_not_a_number", "0::/hachi/job-x\n", "", 0},
        JobCase{"garbled_environment_value", "", std::string("HACHI_JOB_ID=12a\0", 17),
                0},
        JobCase{"nothing", "0::/\n", std::string("PATH=/bin\0", 10), 0}),
    [](const testing::TestParamInfo<JobCase>& row) { return row.param.name; });

TEST_F(FakeProc, DescribesEachLiveProcess) {
  Process(200, "0::/hachi/job-3\n", "", std::string("python\0train.py\0--lr\0", 21), 0);
  Process(201, "0::/user.slice\n", "", std::string("python\0notebook.py\0", 19), 65534);
  const std::vector<GpuProcess> nvml = {{0, 200, 1024}, {2, 201, -1}, {3, 999, 5}};
  const std::vector<api::GpuProcessReport> got = DescribeGpuProcesses(nvml, root_);
  ASSERT_EQ(got.size(), 2u) << "pid 999 exited: left out";
  EXPECT_EQ(got[0].gpu, 0);
  EXPECT_EQ(got[0].pid, 200u);
  EXPECT_EQ(got[0].job, 3);
  EXPECT_EQ(got[0].used_mib, 1024);
  EXPECT_EQ(got[0].command, "python train.py --lr");
  EXPECT_EQ(got[0].user, "root");
  EXPECT_EQ(got[1].gpu, 2);
  EXPECT_EQ(got[1].job, 0);
  EXPECT_EQ(got[1].used_mib, -1);
  EXPECT_EQ(got[1].user, "nobody");
}

TEST_F(FakeProc, LongCommandLinesAreShortened) {
  Process(300, "", "", std::string(1000, 'a'));
  const std::vector<api::GpuProcessReport> got =
      DescribeGpuProcesses({{1, 300, 1}}, root_);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].command, std::string(200, 'a') + "...");
}

// The real /proc: this test process, with HACHI_JOB_ID in its environment.
TEST(RealProc, ThisProcessByItsEnvironment) {
  // The environment of a running process is what it started with: re-read through a
  // child that has the variable from its start.
  char tmpl[] = "/tmp/hachi-proc-env-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string pidfile = std::string(tmpl) + "/pid";
  ASSERT_EQ(std::system(
                ("HACHI_JOB_ID=41 sh -c 'echo $$ > " + pidfile + "; sleep 5' &").c_str()),
            0);
  unsigned pid = 0;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream in(pidfile);
    return static_cast<bool>(in >> pid) && pid > 0;
  }));
  EXPECT_EQ(JobOfProcess(pid), 41);
  kill(static_cast<pid_t>(pid), SIGKILL);
  std::error_code ec;
  fs::remove_all(tmpl, ec);
}

// The soft limit counts a share's processes on its own GPU, all of them, and
// only where NVML gives a figure.
TEST(OverSoftLimitTest, SumsAShareOnItsGpuAgainstItsPromise) {
  const std::map<state::JobId, ShareMemoryLimit> limits{{5, {1, 20480}}, {6, {1, 10240}}};
  const std::vector<api::GpuProcessReport> procs{
      {1, 10, 15000, "a", "python", 5}, {1, 11, 5481, "a", "python", 5},  // 20481: over
      {0, 12, 99999, "a", "python", 5},   // another GPU: not this share's promise
      {1, 13, -1, "b", "python", 6},      // NVML does not say
      {1, 14, 10240, "b", "python", 6},   // exactly what was promised
      {1, 15, 50000, "c", "python", 0}};  // no job: a stray, not ours to stop
  const auto over = OverSoftLimit(procs, limits);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].first, 5);
  EXPECT_EQ(over[0].second,
            "used 20481 MiB of GPU memory on GPU 1, promised 20480 MiB (--gpu-mem)");
  EXPECT_EQ(FormatGib(23654), "23.1 GiB");
  EXPECT_EQ(FormatGib(512), "0.5 GiB");
}

}  // namespace
}  // namespace hachi::agent
