// Per-job cgroups: the limit code paths of both drivers against a temporary tree (the
// controllers of this machine may be absent), and, as root, real jobs in real v1 and v2
// cgroups of a parent of their own (hachi-test-<pid>-...), removed afterwards.
#include "agent/cgroup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/launcher.h"
#include "agent/testing.h"

namespace hachi::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// ---- ChooseCpus -------------------------------------------------------------------

struct CpuCase {
  std::string name;
  int want;
  std::vector<int> all, preferred;
  std::set<int> busy;
  std::vector<int> expect;
};

class ChooseCpusTest : public ::testing::TestWithParam<CpuCase> {};

TEST_P(ChooseCpusTest, Chooses) {
  const CpuCase& c = GetParam();
  EXPECT_EQ(ChooseCpus(c.want, c.all, c.preferred, c.busy), c.expect);
}

const std::vector<int> kEight = {0, 1, 2, 3, 4, 5, 6, 7};
INSTANTIATE_TEST_SUITE_P(
    Cgroup, ChooseCpusTest,
    ::testing::Values(
        CpuCase{"NoRequestGetsAll", 0, kEight, {4, 5, 6, 7}, {}, kEight},
        CpuCase{"FromTheGpusNode", 2, kEight, {4, 5, 6, 7}, {}, {4, 5}},
        CpuCase{"SkipsBusyOnTheNode", 2, kEight, {4, 5, 6, 7}, {4, 5}, {6, 7}},
        CpuCase{"SpillsToFreeElsewhere", 3, kEight, {4, 5, 6, 7}, {4, 5}, {0, 6, 7}},
        CpuCase{"SharesTheNodeWhenAllBusy", 2, {0, 1}, {1}, {0, 1}, {0, 1}},
        CpuCase{"TwoCoreVmNoTopology", 1, {0, 1}, {}, {0}, {1}},
        CpuCase{"UnknownPreferredIgnored", 1, {0, 1}, {9}, {}, {0}},
        CpuCase{"MoreThanTheNodeGetsAll", 4, {0, 1}, {}, {}, {0, 1}}),
    [](const ::testing::TestParamInfo<CpuCase>& p) { return p.param.name; });

// ---- Drivers against a temporary tree -----------------------------------------------

// The real file operations over a temporary tree, recording writes; RemoveDir removes
// the files a real cgroup directory would not have.
class TreeFs : public CgroupFs {
 public:
  Status RemoveDir(const std::string& path) override {
    std::error_code ec;
    fs::remove_all(path, ec);
    return Status::Ok();
  }
  Status Write(const std::string& path, const std::string& text) override {
    std::lock_guard<std::mutex> lock(mu);
    writes.emplace_back(path, text);
    return CgroupFs::Write(path, text);
  }
  std::vector<std::string> WritesTo(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const auto& [p, t] : writes) {
      if (p == path) out.push_back(t);
    }
    return out;
  }
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> writes;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

class TempTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-cgtree-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  CgroupOptions Options(std::string mode) {
    CgroupOptions o;
    o.mode = std::move(mode);
    o.root = root_;
    o.parent = "hachi";
    o.fs = &fs_;
    return o;
  }
  std::string root_;
  TreeFs fs_;
};

TEST_F(TempTree, CgroupV2WritesLimitsWhereControllersAreDelegated) {
  Put(root_ + "/cgroup.controllers", "cpuset cpu io memory hugetlb pids\n");
  Put(root_ + "/cgroup.subtree_control", "");
  Result<std::unique_ptr<CgroupDriver>> d = OpenCgroups(Options("auto"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ((*d)->mode(), CgroupMode::kV2);
  // Delegated to the parent and from it to the jobs.
  EXPECT_EQ(fs_.WritesTo(root_ + "/cgroup.subtree_control"),
            std::vector<std::string>{"+cpuset +memory +pids"});
  EXPECT_EQ(fs_.WritesTo(root_ + "/hachi/cgroup.subtree_control"),
            std::vector<std::string>{"+cpuset +memory +pids"});
  EXPECT_NE((*d)->Describe().find("v2 (memory cpuset pids devices:bpf)"),
            std::string::npos)
      << (*d)->Describe();

  CgroupLimits l;
  l.memory_bytes = 2048LL << 20;
  l.cpus = "2-3";
  l.mems = "0";
  l.pids_max = 8192;
  Put(root_ + "/hachi/job-7/memory.swap.max", "max");
  Result<JobCgroup> cg = (*d)->Create("job-7", l);
  ASSERT_TRUE(cg.ok()) << cg.status().message();
  const std::string dir = root_ + "/hachi/job-7";
  EXPECT_EQ(cg->procs_files, std::vector<std::string>{dir + "/cgroup.procs"});
  EXPECT_EQ(Slurp(dir + "/memory.max"), "2147483648");
  EXPECT_EQ(Slurp(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(Slurp(dir + "/cpuset.cpus"), "2-3");
  EXPECT_EQ(Slurp(dir + "/cpuset.mems"), "0");
  EXPECT_EQ(Slurp(dir + "/pids.max"), "8192");

  Put(dir + "/memory.events",
      "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n");
  EXPECT_EQ((*d)->OomKills(*cg), 1);
  ASSERT_EQ((*d)->Leftovers().size(), 1u);
  EXPECT_EQ((*d)->Leftovers()[0].name, "job-7");
  EXPECT_TRUE((*d)->Destroy(*cg).ok());
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE((*d)->Leftovers().empty());
}

TEST_F(TempTree, CgroupV2WithoutControllersSaysWhatIsNotLimited) {
  Put(root_ + "/cgroup.controllers", "\n");  // a hybrid machine: all bound to v1
  Result<std::unique_ptr<CgroupDriver>> d = OpenCgroups(Options("v2"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_NE((*d)->Describe().find("not limited: memory cpuset pids"), std::string::npos)
      << (*d)->Describe();
  CgroupLimits l;
  l.memory_bytes = 1 << 30;
  l.pids_max = 10;
  Result<JobCgroup> cg = (*d)->Create("job-1", l);
  ASSERT_TRUE(cg.ok()) << cg.status().message();
  EXPECT_FALSE(fs::exists(root_ + "/hachi/job-1/memory.max"));
  EXPECT_FALSE(fs::exists(root_ + "/hachi/job-1/pids.max"));
  EXPECT_EQ((*d)->OomKills(*cg), 0);
}

TEST_F(TempTree, CgroupV1WritesEveryControllerAndDeniesTheOtherGpus) {
  for (const char* c : {"memory", "cpuset", "pids", "devices", "freezer"}) {
    fs::create_directories(root_ + "/" + c);
  }
  Put(root_ + "/cpuset/cpuset.cpus", "0-7\n");
  Put(root_ + "/cpuset/cpuset.mems", "0-1\n");
  Put(root_ + "/memory/hachi/job-3/memory.memsw.limit_in_bytes", "");
  Result<std::unique_ptr<CgroupDriver>> d = OpenCgroups(Options("auto"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ((*d)->mode(), CgroupMode::kV1);
  EXPECT_EQ((*d)->ParentDirs().size(), 5u);
  // A new v1 cpuset is empty: the parent gets the CPUs and nodes of its own parent.
  EXPECT_EQ(Slurp(root_ + "/cpuset/hachi/cpuset.cpus"), "0-7");
  EXPECT_EQ(Slurp(root_ + "/cpuset/hachi/cpuset.mems"), "0-1");

  CgroupLimits l;
  l.memory_bytes = 1 << 30;
  l.cpus = "4-5";
  l.pids_max = 100;
  l.restrict_gpus = true;
  l.gpu_minors = {2, 3};
  Result<JobCgroup> cg = (*d)->Create("job-3", l);
  ASSERT_TRUE(cg.ok()) << cg.status().message();
  EXPECT_EQ(cg->procs_files.size(), 5u);
  EXPECT_EQ(Slurp(root_ + "/memory/hachi/job-3/memory.limit_in_bytes"), "1073741824");
  EXPECT_EQ(Slurp(root_ + "/memory/hachi/job-3/memory.memsw.limit_in_bytes"),
            "1073741824");
  EXPECT_EQ(Slurp(root_ + "/cpuset/hachi/job-3/cpuset.cpus"), "4-5");
  EXPECT_EQ(Slurp(root_ + "/cpuset/hachi/job-3/cpuset.mems"), "0-1");  // the parent's
  EXPECT_EQ(Slurp(root_ + "/pids/hachi/job-3/pids.max"), "100");
  const std::vector<std::string> denied =
      fs_.WritesTo(root_ + "/devices/hachi/job-3/devices.deny");
  EXPECT_EQ(denied.size(), 252u);  // 195:0-253 less the job's two
  EXPECT_EQ(denied.front(), "c 195:0 rwm");
  EXPECT_EQ(std::count(denied.begin(), denied.end(), "c 195:2 rwm"), 0);
  EXPECT_EQ(std::count(denied.begin(), denied.end(), "c 195:3 rwm"), 0);
  EXPECT_EQ(std::count(denied.begin(), denied.end(), "c 195:4 rwm"), 1);
  EXPECT_EQ(std::count(denied.begin(), denied.end(), "c 195:255 rwm"), 0);  // nvidiactl

  Put(root_ + "/memory/hachi/job-3/memory.oom_control",
      "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  EXPECT_EQ((*d)->OomKills(*cg), 2);
  EXPECT_TRUE((*d)->Destroy(*cg).ok());
  EXPECT_FALSE(fs::exists(root_ + "/memory/hachi/job-3"));
  EXPECT_FALSE(fs::exists(root_ + "/freezer/hachi/job-3"));
}

TEST_F(TempTree, CgroupModeNoneAndBadModes) {
  Result<std::unique_ptr<CgroupDriver>> none = OpenCgroups(Options("none"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  EXPECT_FALSE(OpenCgroups(Options("v3")).ok());
  // Nothing mounted in the tree.
  Result<std::unique_ptr<CgroupDriver>> nothing = OpenCgroups(Options("auto"));
  EXPECT_FALSE(nothing.ok());
}

}  // namespace
}  // namespace hachi::agent
