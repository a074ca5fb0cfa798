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

#include "agent/isolation.h"
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

// A job on the MIG device gpu1/gi2/ci0 (a fake mig-minors) is allowed
// exactly its parent GPU's node and that device's two caps; v1 denies the other GPUs
// and every other caps minor the driver lists.
TEST_F(TempTree, MigJobGetsItsParentGpuAndItsTwoCapsOnly) {
  Put(root_ + "/proc/driver/nvidia-caps/mig-minors",
      "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
      "gpu1/gi2/access 21\ngpu1/gi2/ci0/access 22\ngpu1/gi3/access 30\n"
      "gpu1/gi3/ci0/access 31\n");
  Put(root_ + "/proc/devices", "Character devices:\n195 nvidia\n237 nvidia-caps\n");
  api::LaunchSpec spec = MakeLaunch(4).Gpus({1});
  spec.mig = {{"MIG-x", 1, 2, 0}};
  CgroupLimits l;
  l.restrict_gpus = true;
  l.gpu_minors = {1};
  ASSERT_TRUE(Isolation::MigDeviceLimits(spec, {}, root_, &l).ok());
  EXPECT_EQ(l.caps_major, 237);
  EXPECT_EQ(l.cap_minors, (std::vector<unsigned>{21, 22}));
  std::vector<unsigned> others = l.cap_others;
  std::sort(others.begin(), others.end());
  EXPECT_EQ(others, (std::vector<unsigned>{1, 2, 12, 13, 30, 31}));
  // A placement that says GPU 1 is /dev/nvidia0 reads gpu0's entries instead.
  api::LaunchSpec minor0 = spec;
  minor0.mig = {{"MIG-z", 1, 1, 0}};
  CgroupLimits l0;
  ASSERT_TRUE(Isolation::MigDeviceLimits(minor0, {{0, {}}, {0, {}}}, root_, &l0).ok());
  EXPECT_EQ(l0.cap_minors, (std::vector<unsigned>{12, 13}));
  // Missing entries and files are errors naming them.
  spec.mig = {{"MIG-y", 1, 5, 0}};
  Status missing = Isolation::MigDeviceLimits(spec, {}, root_, &l);
  EXPECT_NE(missing.message().find("MIG-y: mig-minors has no gpu1/gi5/access"),
            std::string::npos)
      << missing.message();
  Status nofile = Isolation::MigDeviceLimits(spec, {}, root_ + "/nowhere", &l);
  EXPECT_NE(nofile.message().find("/nowhere/proc/driver/nvidia-caps/mig-minors"),
            std::string::npos)
      << nofile.message();

  // The v1 rules: 195:* but 1, and the caps major's listed minors but 21 and 22.
  spec.mig = {{"MIG-x", 1, 2, 0}};
  ASSERT_TRUE(Isolation::MigDeviceLimits(spec, {}, root_, &l).ok());
  for (const char* c : {"memory", "cpuset", "pids", "devices", "freezer"}) {
    fs::create_directories(root_ + "/" + c);
  }
  Put(root_ + "/cpuset/cpuset.cpus", "0-7\n");
  Put(root_ + "/cpuset/cpuset.mems", "0-1\n");
  Result<std::unique_ptr<CgroupDriver>> d = OpenCgroups(Options("v1"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_TRUE((*d)->Create("job-4", l).ok());
  const std::vector<std::string> denied =
      fs_.WritesTo(root_ + "/devices/hachi/job-4/devices.deny");
  EXPECT_EQ(std::count(denied.begin(), denied.end(), "c 195:1 rwm"), 0);
  EXPECT_EQ(std::count(denied.begin(), denied.end(), "c 195:0 rwm"), 1);
  for (const char* own : {"c 237:21 rwm", "c 237:22 rwm"}) {
    EXPECT_EQ(std::count(denied.begin(), denied.end(), own), 0) << own;
  }
  for (const char* other : {"c 237:1 rwm", "c 237:2 rwm", "c 237:12 rwm", "c 237:13 rwm",
                            "c 237:30 rwm", "c 237:31 rwm"}) {
    EXPECT_EQ(std::count(denied.begin(), denied.end(), other), 1) << other;
  }
  EXPECT_EQ(denied.size(), 253u + 6u);  // 195:0-253 less 1, six caps
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

// One 8-GPU job's 4096 x 8 pids could take every pid of a node. The jobs'
// pids.max together now stay within the node's budget, min(pid_max, threads-max) less
// the agent's reserve.
TEST(NodePidsBudget, KernelLimitsLessTheReserve) {
  struct Row {
    const char* name;
    int64_t pid_max, threads_max, reserve, want;
  };
  const Row rows[] = {
      {"big_pid_max_default_reserve", 4194304, 4194304, -1, 4194304 - 419430},
      {"small_pid_max_reserve_4096", 32768, 1000000, -1, 32768 - 4096},
      {"threads_max_is_smaller", 4194304, 63000, -1, 63000 - 6300},
      {"explicit_reserve", 100000, 100000, 500, 99500},
      {"reserve_above_the_limit", 5000, 5000, 9000, 0},
      {"unknown_pid_max_is_the_kernels_default", 0, 0, -1, 32768 - 4096},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(Isolation::NodePidsBudget(r.pid_max, r.threads_max, r.reserve), r.want)
        << r.name;
  }
}

// A job's pids.max is its share of the budget, in proportion to what it holds of the
// node, so the jobs the scheduler fits on a node always fit in its pids too.
TEST(JobPidsMax, FollowsTheGpusOrCpusTheJobHolds) {
  using Claim = Isolation::PidsClaim;
  struct Row {
    const char* name;
    Claim claim;
    int64_t budget, booked, want;
  };
  const Row rows[] = {
      {"big_budget_capped_per_gpu", {8, 8, 0, 64}, 1000000, 0, 32768},
      {"one_gpu_of_eight_big_budget", {1, 8, 0, 64}, 1000000, 0, 4096},
      // pid_max 32768 less the 4096 reserve: eight 1-GPU jobs get 3584 each, all fit.
      {"one_gpu_of_eight_small_budget", {1, 8, 0, 64}, 28672, 7 * 3584, 3584},
      {"whole_node_small_budget", {8, 8, 0, 64}, 28672, 0, 28672},
      {"gpu_share_quarter", {0.25, 8, 0, 64}, 28672, 0, 896},
      {"cpu_job_by_its_cpus", {0, 8, 16, 64}, 28672, 0, 4096},
      {"cpu_job_small_share", {0, 8, 4, 64}, 28672, 0, 1792},
      {"no_gpus_no_cpus_asked", {0, 0, 0, 64}, 1000000, 0, 4096},
      {"adopted_runs_leave_less", {1, 8, 0, 64}, 28672, 28672 - 1000, 1000},
  };
  for (const Row& r : rows) {
    Result<int64_t> got = Isolation::JobPidsMax(4096, r.claim, r.budget, r.booked);
    ASSERT_TRUE(got.ok()) << r.name << ": " << got.status().ToString();
    EXPECT_EQ(*got, r.want) << r.name;
  }
  EXPECT_EQ(Isolation::JobPidsMax(4096, {1, 8, 0, 64}, 30000, 29990).status().code(),
            StatusCode::kUnavailable)
      << "adopted runs hold it all";
}

TEST_F(TempTree, JobsPidsTogetherStayWithinTheNodesBudget) {
  // A v1 tree (v2's device filter needs a real cgroup2 to attach its BPF program to).
  for (const char* c : {"memory", "cpuset", "pids", "devices", "freezer"}) {
    fs::create_directories(root_ + "/" + c);
  }
  Put(root_ + "/cpuset/cpuset.cpus", "0-3\n");
  Put(root_ + "/cpuset/cpuset.mems", "0\n");
  Result<std::unique_ptr<CgroupDriver>> d = OpenCgroups(Options("v1"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  IsolationOptions o;
  o.cgroups = std::move(*d);
  o.node_cpus = {0, 1, 2, 3};
  o.gpus.resize(4);  // a 4-GPU node
  o.pid_max = 20000;
  o.threads_max = 100000;
  o.pids_reserve = 10000;  // a budget of 10,000 for all jobs
  Isolation iso(o);
  EXPECT_EQ(iso.pids_budget(), 10000);
  auto pids_of = [&](int job) {
    return Slurp(root_ + "/pids/hachi/job-" + std::to_string(job) + "/pids.max");
  };
  // Every GPU taken, by jobs that would each have liked 4096 pids: each gets its GPUs'
  // share of the 10,000, and the last starts (greedy, it failed: "pids are taken").
  SpawnRequest::Setup s1, s2, s3, s4;
  Result<JobIsolation> a = iso.Prepare(MakeLaunch(1).Gpus({0}), &s1);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(pids_of(1), "2500");
  Result<JobIsolation> b = iso.Prepare(MakeLaunch(2).Gpus({1, 2}), &s2);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(pids_of(2), "5000");
  Result<JobIsolation> c = iso.Prepare(MakeLaunch(3).Gpus({3}), &s3);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(pids_of(3), "2500");
  EXPECT_EQ(iso.pids_booked(), 10000);
  // A job's end gives its pids back.
  iso.Finish(*a);
  EXPECT_EQ(iso.pids_booked(), 7500);
  Result<JobIsolation> e = iso.Prepare(MakeLaunch(4).Gpus({0}), &s4);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(pids_of(4), "2500");
  EXPECT_LE(iso.pids_booked(), iso.pids_budget());
  iso.Finish(*b);
  iso.Finish(*c);
  iso.Finish(*e);
  EXPECT_EQ(iso.pids_booked(), 0);
}

// /dev/shm is never bigger than the job's memory.
TEST(ShmMib, NeverMoreThanTheJobsMemory) {
  struct Row {
    const char* name;
    int64_t shm, memory, want;
  };
  const Row rows[] = {
      {"asked_within_memory", 512, 4096, 512},
      {"asked_above_memory", 8192, 1024, 1024},
      {"default_half_of_memory", 0, 1024, 512},
      {"default_capped_at_64g", 0, 1 << 20, 64 * 1024},
      {"no_memory_limit_asked", 128, 0, 128},
      {"no_memory_limit_default", 0, 0, 64 * 1024},
      {"tiny_memory", 0, 1, 1},
  };
  for (const Row& r : rows) {
    api::LaunchSpec spec = MakeLaunch(1).Shm(r.shm);
    spec.memory_mib = r.memory;
    EXPECT_EQ(Isolation::ShmMib(spec), r.want) << r.name;
  }
}

}  // namespace
}  // namespace hachi::agent
