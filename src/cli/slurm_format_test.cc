// Golden-file tests of the renderers: fixed records, fixed `now`, TZ=UTC, compared with
// src/cli/testdata/*.txt. HACHI_UPDATE_GOLDEN=1 rewrites the files instead.
#include "cli/slurm_format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "cli/golden_testing.h"
#include "core/hostlist.h"
#include "core/strings.h"
#include "core/time_format.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::cli {
namespace {

using state::JobRecord;
using state::JobState;
using state::NodeStatus;

constexpr Time kNow = 1795979885;  // 2026-11-29T19:18:05Z, as in formats.txt

using testing::ExpectGolden;

class SlurmFormat : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }
};

// Fluent builder: MakeJob(3136).Name("pair").Gpus(2).Running("gpu02", "0-1").
class MakeJob {
 public:
  explicit MakeJob(state::JobId id) {
    j_.id = id;
    j_.req.user = "alice";
    j_.req.partition = "gpu8";
    j_.req.time_limit = 5 * kMinute;
    j_.req.cpus_per_gpu = 8;
    j_.req.memory_mib_per_gpu = 60000;
    j_.spec.name = "fill";
    j_.spec.workdir = "/home/alice";
    j_.spec.uid = 1000;
    j_.spec.gid = 1000;
    j_.spec.set_script("#!/bin/sh\ntrue\n");
    j_.submit_time = kNow - 3;
  }
  MakeJob& Name(std::string n) {
    j_.spec.name = std::move(n);
    return *this;
  }
  MakeJob& User(std::string u) {
    j_.req.user = std::move(u);
    return *this;
  }
  MakeJob& Partition(std::string p) {
    j_.req.partition = std::move(p);
    return *this;
  }
  MakeJob& Gpus(int g) {
    j_.req.gpus = g;
    return *this;
  }
  MakeJob& MasterPort(int port) {
    j_.master_port = port;
    return *this;
  }
  MakeJob& Gang(int nodes, int per_node) {
    j_.req.nodes = nodes;
    j_.req.gpus_per_node = per_node;
    j_.req.gpus = nodes * per_node;
    return *this;
  }
  MakeJob& Share(int milli, int64_t mem) {
    j_.req.gpus = 1;
    j_.req.gpu_share_milli = milli;
    j_.req.gpu_memory_mib = mem;
    return *this;
  }
  MakeJob& Limit(Duration d) {
    j_.req.time_limit = d;
    return *this;
  }
  MakeJob& Submitted(Time t) {
    j_.submit_time = t;
    return *this;
  }
  MakeJob& Pending(std::string reason) {
    j_.state = JobState::kPending;
    j_.reason = std::move(reason);
    return *this;
  }
  MakeJob& Held() {
    j_.held = true;
    return *this;
  }
  MakeJob& Running(const std::string& node, const std::string& gpus,
                   Time start = kNow - 3) {
    j_.state = JobState::kRunning;
    j_.start_time = start;
    state::NodeAllocation a;
    a.node = node;
    a.gpus = *GpuSet::Parse(gpus);
    a.cpus = a.gpus.size() * 8;
    a.memory_mib = a.gpus.size() * 60000;
    if (j_.req.Shared()) {
      a.cpus = 2;
      a.memory_mib = 16384;
      a.share_milli = j_.req.gpu_share_milli;
      a.gpu_memory_mib = j_.req.gpu_memory_mib;
    }
    j_.allocations.push_back(a);
    return *this;
  }
  MakeJob& Ended(JobState s, Time end, int code, int sig, std::string reason) {
    j_.state = s;
    j_.end_time = end;
    j_.exit_code = code;
    j_.signal = sig;
    j_.reason = std::move(reason);
    return *this;
  }
  MakeJob& Array(state::JobId first, int task) {
    j_.spec.array_job_id = first;
    j_.spec.array_task_id = task;
    return *this;
  }
  MakeJob& Deps(std::vector<sched::Dependency> d) {
    j_.req.dependencies = std::move(d);
    return *this;
  }
  MakeJob& Spec(const std::function<void(JobRecord&)>& f) {
    f(j_);
    return *this;
  }
  operator JobRecord() const { return j_; }  // NOLINT: the builder's point

 private:
  JobRecord j_;
};

std::vector<JobRecord> Jobs() {
  return {
      MakeJob(3135).Name("whole-node").Gpus(8).Running("gpu01", "0-7"),
      MakeJob(3136).Name("pair").Partition("gpu-shared").Gpus(2).Running("gpu02", "0-1"),
      MakeJob(3137).Name("quad").Partition("gpu-shared").Gpus(4).Running("gpu02", "4-7"),
      MakeJob(3138).Gpus(8).Running("gpu03", "0-7"),
      MakeJob(3139).Gpus(8).Running("gpu04", "0-7", kNow - 2 * kHour - 5),
      MakeJob(3140).Gpus(8).Pending("Resources"),
      MakeJob(3141).Gpus(8).Pending("Priority"),
      MakeJob(3142).Name("waits").Gpus(8).Pending("Priority").User("bob"),
      MakeJob(3143).Name("later").Gpus(1).Pending("").Held().Partition("gpu-shared"),
      MakeJob(3144)
          .Name("llama-70b-finetune")
          .Gang(2, 8)
          .Limit(3 * kDay)
          .Running("gpu05", "0-7", kNow - kDay - 3 * kHour)
          .Running("gpu06", "0-7", kNow - kDay - 3 * kHour)
          .MasterPort(29501),
      MakeJob(3145)
          .Name("notebook")
          .Partition("gpu-shared")
          .Share(250, 20480)
          .Running("gpu02", "3"),
      MakeJob(3146)
          .Name("sweep")
          .Array(3146, 0)
          .Gpus(1)
          .Partition("gpu-shared")
          .Pending("Dependency")
          .Deps({{sched::DependencyKind::kAfterOk, 3144}}),
      MakeJob(3100)
          .Name("done")
          .Gpus(2)
          .Running("gpu02", "2-3", kNow - 600)
          .Ended(JobState::kCompleted, kNow - 60, 0, 0, ""),
  };
}

TEST_F(SlurmFormat, QueueDefault) {
  std::vector<JobRecord> jobs = FilterJobs(Jobs(), {});
  SortForQueue(&jobs);
  Result<std::string> out = FormatQueue(jobs, kNow);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGolden("queue_default.txt", *out);
}

TEST_F(SlurmFormat, ControlBytesInNamesAndCommentsArePrintedEscaped) {
  // A name that would clear the screen and retitle the terminal of whoever lists it.
  JobRecord j =
      MakeJob(3200).Name("x\x1b[2J\x1b]0;pwned\x07").Gpus(1).Pending("Priority");
  j.spec.comment = "c\r\x1b[1A";
  Result<std::string> q = FormatQueue({j}, kNow, "%j|%k");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_NE(q->find("x\\x1b[2J\\x1b]0;pwned\\x07|c\\x0d\\x1b[1A"), std::string::npos)
      << *q;
  const std::string show = FormatShowJob(j, "", kNow);
  EXPECT_NE(show.find("JobName=x\\x1b[2J"), std::string::npos) << show;
  EXPECT_NE(show.find("Comment=c\\x0d\\x1b[1A"), std::string::npos) << show;
  EXPECT_EQ(q->find('\x1b'), std::string::npos);
  EXPECT_EQ(show.find('\x1b'), std::string::npos);
}

// What the record alone does not say: the group's name and a pending job's priority;
// GPU indices as Slurm's ranges.
TEST_F(SlurmFormat, ShowJobTakesItsGroupAndPriorityAndPrintsIndexRanges) {
  JobRecord pending = MakeJob(3201).Gpus(1).Pending("Priority");
  pending.spec.gid = 100;
  const std::string p = FormatShowJob(pending, "", kNow, {"staff", 10512});
  EXPECT_NE(p.find(" GroupId=staff(100) MCS_label=N/A\n   Priority=10512 Nice=0 "),
            std::string::npos)
      << p;
  const std::string r = FormatShowJob(MakeJob(3202).Gpus(2).Running("gpu02", "0-1"), "",
                                      kNow, {"staff", 7});
  EXPECT_NE(r.find("GRES=gpu:2(IDX:0-1)"), std::string::npos) << r;
  EXPECT_NE(r.find("   Priority=0 "), std::string::npos) << "not pending: none kept";
}

// The scheduler's reasons that Slurm lacks are printed in Slurm's words (scripts match
// them: "Resources", "Priority", "JobHeldUser"); its own pass through.
TEST_F(SlurmFormat, PendingReasonsInSlurmsWords) {
  const std::pair<const char*, const char*> rows[] = {
      {"Isolation", "Resources"},
      {"Fragmented", "Resources"},
      {"Held", "JobHeldUser"},
      {"Reserved", "Priority"},
      {"UserQuota", "QOSMaxGRESPerUser"},
      {"AccountQuota", "AssocGrpGRES"},
      {"TimeWindow", "PartitionInactive"},
      {"NodesUnavailable", "ReqNodeNotAvail"},
      {"Internal", "None"},
      {"Resources", "Resources"},
      {"Dependency", "Dependency"},
      {"BeginTime", "BeginTime"},
  };
  for (const auto& [ours, slurm] : rows) {
    const JobRecord j = MakeJob(3300).Gpus(1).Pending(ours);
    Result<std::string> q = FormatQueue({j}, kNow, "%r|%R");
    ASSERT_TRUE(q.ok()) << q.status().message();
    EXPECT_EQ(*q, std::string("REASON|NODELIST(REASON)\n") + slurm + "|(" + slurm + ")\n")
        << ours;
    EXPECT_NE(FormatShowJob(j, "", kNow).find(std::string(" Reason=") + slurm + " "),
              std::string::npos)
        << ours;
  }
}

// Who held a job decides Slurm's word, whatever the cycle last said of it.
TEST_F(SlurmFormat, AHoldSaysWhoseItIs) {
  for (const bool admin : {false, true}) {
    JobRecord j = MakeJob(3301).Gpus(1).Pending("Held").Held();
    j.held_by_admin = admin;
    const std::string word = admin ? "JobHeldAdmin" : "JobHeldUser";
    Result<std::string> q = FormatQueue({j}, kNow, "%r");
    ASSERT_TRUE(q.ok()) << q.status().message();
    EXPECT_EQ(*q, "REASON\n" + word + "\n");
    EXPECT_NE(FormatShowJob(j, "", kNow).find(" Reason=" + word + " "),
              std::string::npos);
  }
}

TEST_F(SlurmFormat, QueueSlurmFormatString) {
  std::vector<JobRecord> jobs = FilterJobs(Jobs(), {});
  SortForQueue(&jobs);
  Result<std::string> out =
      FormatQueue(jobs, kNow, "%.8i %.10P %.10j %.8u %.2t %.10M %.6D %.12b %R");
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGolden("queue_format.txt", *out);
}

TEST_F(SlurmFormat, QueueEveryCode) {
  QueueFilter all;
  all.states = *ParseStateList("all");
  std::vector<JobRecord> jobs = FilterJobs(Jobs(), all);
  Result<std::string> out = FormatQueue(
      jobs, kNow, "%-10i|%F|%K|%T|%l|%L|%C|%m|%V|%S|%e|%a|%q|%E|%r|%N|%k|%Z|%%|%-5D|");
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGolden("queue_codes.txt", *out);
}

TEST_F(SlurmFormat, QueueFilters) {
  struct Case {
    std::string name;
    QueueFilter filter;
    std::vector<state::JobId> want;
  };
  const std::vector<Case> cases = {
      {"default_hides_final",
       {},
       {3135, 3136, 3137, 3138, 3139, 3140, 3141, 3142, 3143, 3144, 3145, 3146}},
      {"user", {{"bob"}, {}, {}, {}}, {3142}},
      {"partition", {{}, {"gpu-shared"}, {}, {}}, {3136, 3137, 3143, 3145, 3146}},
      {"state_pending",
       {{}, {}, {JobState::kPending}, {}},
       {3140, 3141, 3142, 3143, 3146}},
      {"state_completed", {{}, {}, {JobState::kCompleted}, {}}, {3100}},
      {"ids", {{}, {}, {}, {3140, 3100}}, {3140}},
      {"array_job_id", {{}, {}, {}, {3146}}, {3146}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<state::JobId> got;
    for (const JobRecord& j : FilterJobs(Jobs(), c.filter)) got.push_back(j.id);
    EXPECT_EQ(got, c.want);
  }
}

// A running job its partition's idle-GPU policy warned about says so in %R
// (after its nodes) and %r.
TEST_F(SlurmFormat, QueueShowsIdleGpuWarnings) {
  JobRecord j = MakeJob(3200).Name("idle").Gpus(2).Running("gpu02", "2-3", kNow - 600);
  j.reason =
      "idle GPUs: every GPU below 5 % since 2026-12-03T12:00:00Z (over 30m00s, "
      "partition gpu's idle policy)";
  Result<std::string> out = FormatQueue({j}, kNow, "%i %R|%r");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "JOBID NODELIST(REASON)|REASON\n3200 gpu02 (IdleGpus)|IdleGpus\n");
}

TEST_F(SlurmFormat, QueueErrors) {
  Result<std::string> out = FormatQueue({}, kNow, "%.8i %z");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "format '%.8i %z': unknown field %z (known: iFKPjuaqtTMlLDRrNCmVSebkZE)");
  Result<std::vector<JobState>> st = ParseStateList("PD,bogus");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(
      st.status().message(),
      "--states 'PD,bogus': 'bogus' is not a job state (use PD, R, CD, F, CA, TO, NF, "
      "OOM or all)");
  Result<std::vector<JobState>> ok = ParseStateList("pending,R");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<JobState>{JobState::kPending, JobState::kRunning}));
}

TEST_F(SlurmFormat, ShowJob) {
  std::vector<JobRecord> jobs = Jobs();
  auto find = [&](state::JobId id) {
    for (const JobRecord& j : jobs) {
      if (j.id == id) return j;
    }
    return JobRecord{};
  };
  JobRecord failed = MakeJob(3099)
                         .Name("crash")
                         .Gpus(4)
                         .Running("gpu03", "0-3", kNow - 100)
                         .Ended(JobState::kFailed, kNow - 50, 1, 0, "exit code 1")
                         .Spec([](JobRecord& j) {
                           j.spec.stdout_path = "logs/%x-%j.out";
                           j.spec.stderr_path = "/scratch/%u/%j.err";
                           j.spec.set_argv({"--epochs", "3"});
                           j.spec.requeue = true;
                           j.requeues = 1;
                           j.spec.comment = "nightly";
                           j.spec.container_image = "pytorch:24.01";
                           j.spec.shm_mib = 8192;
                           j.req.account = "vision";
                           j.req.qos = "high";
                           j.req.gpu_model = "h100";
                         });
  std::string out = FormatShowJob(find(3137), "", kNow) + "\n" +
                    FormatShowJob(find(3142),
                                  "waits for 8 GPUs on one node in gpu8\n"
                                  "gpu01: 0 of 8 GPUs free (busy until 19:23:02)\n"
                                  "gpu02: partition gpu-shared only",
                                  kNow) +
                    "\n" + FormatShowJob(find(3144), "", kNow) + "\n" +
                    FormatShowJob(find(3145), "", kNow) + "\n" +
                    FormatShowJob(find(3143), "", kNow) + "\n" +
                    FormatShowJob(find(3146), "waits for 3144 (afterok)", kNow) + "\n" +
                    FormatShowJob(failed, "", kNow);
  ExpectGolden("show_job.txt", out);
}

std::vector<NodeStatus> Nodes() {
  auto node = [](std::string name, std::vector<state::JobId> jobs) {
    NodeStatus n;
    n.record.name = std::move(name);
    n.record.address = "10.0.0.1";
    n.record.cpus = 64;
    n.record.memory_mib = 512000;
    n.record.state = state::NodeState::kUp;
    n.gpus = 8;
    n.gpu_model = "NVIDIA H100 80GB HBM3";
    n.gpu_memory_mib = 81559;
    n.interconnect = "nvswitch";
    n.partitions = {"gpu8", "gpu-shared"};
    n.gpu_jobs = std::move(jobs);
    n.gpu_share_milli.assign(8, 0);
    for (state::JobId j : n.gpu_jobs) {
      if (j != 0) {
        n.alloc_cpus += 8;
        n.alloc_memory_mib += 60000;
      }
    }
    return n;
  };
  std::vector<NodeStatus> v;
  v.push_back(node("gpu01", {3135, 3135, 3135, 3135, 3135, 3135, 3135, 3135}));
  NodeStatus g2 = node("gpu02", {3136, 3136, 3100, 3145, 3137, 3137, 3137, 3137});
  g2.gpu_share_milli[3] = 250;
  v.push_back(g2);
  NodeStatus g3 = node("gpu03", {0, 0, 0, 0, 0, 0, 0, 0});
  g3.record.unhealthy.Insert(5);
  g3.record.unhealthy_reasons[5] =
      "Xid 79: GPU has fallen off the bus (2026-11-30T01:02:03Z)";
  v.push_back(g3);
  NodeStatus g4 = node("gpu04", {3139, 3139, 3139, 3139, 3139, 3139, 3139, 3139});
  g4.record.state = state::NodeState::kDrained;
  g4.record.state_reason = "bad fan";
  v.push_back(g4);
  NodeStatus g5 = node("gpu05", {0, 0, 0, 0, 0, 0, 0, 0});
  g5.record.state = state::NodeState::kDrained;
  g5.record.state_reason = "maintenance";
  v.push_back(g5);
  NodeStatus g6 = node("gpu06", {0, 0, 0, 0, 0, 0, 0, 0});
  g6.record.state = state::NodeState::kDown;
  g6.record.state_reason = "agent silent 30s";
  v.push_back(g6);
  // A node running its burn-in checks.
  NodeStatus g7 = node("gpu07", {0, 0, 0, 0, 0, 0, 0, 0});
  g7.record.state = state::NodeState::kBurnIn;
  g7.record.state_reason = "burn-in: running doctor";
  g7.record.burn_in = state::BurnInPhase::kRunning;
  v.push_back(g7);
  NodeStatus a100 = node("a100-1", {0, 0, 0, 0});
  a100.gpus = 4;
  a100.gpu_model = "NVIDIA A100-SXM4-80GB";
  a100.interconnect = "nvlink-mesh";
  a100.partitions = {"small"};
  a100.gpu_jobs = {7, 0, 12345678, 0};
  a100.gpu_share_milli = {0, 0, 1000, 0};
  a100.record.unhealthy.Insert(2);
  a100.alloc_cpus = 16;
  v.push_back(a100);
  return v;
}

TEST_F(SlurmFormat, Nodes) {
  Result<std::string> def = FormatNodes(Nodes());
  ASSERT_TRUE(def.ok()) << def.status().message();
  Result<std::string> custom = FormatNodes(Nodes(), "%n %G %C");
  ASSERT_TRUE(custom.ok());
  Result<std::string> more = FormatNodes(Nodes(), "%N %T %c %m %e %O %D %o %j");
  ASSERT_TRUE(more.ok());
  std::string pictures;
  for (const NodeStatus& n : Nodes()) pictures += FormatGpuPicture(n);
  ExpectGolden("nodes.txt", *def + "\n" + *custom + "\n" + *more + "\n" + pictures);
  for (const std::string_view line : SplitLines(pictures))
    EXPECT_LE(line.size(), 80u) << line;
  Result<std::string> bad = FormatNodes(Nodes(), "%n %Q");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "format '%n %Q': unknown field %Q (known: NnPtTGjCcmeOEDo)");
}

// A node whose GPUs 0-2 are in MIG mode: the picture names each one's layout (GPU 2
// has no instances and cannot run jobs) and the jobs on its devices.
TEST_F(SlurmFormat, GpuPictureShowsMigDevices) {
  topo::Topology t = *topo::LoadPreset("hgx-h100");
  const topo::MigDevice slice{"1g.10gb", "", -1, -1, 0};
  t.mutable_gpu(0).mig_enabled = true;
  t.mutable_gpu(0).mig_devices.assign(7, slice);
  t.mutable_gpu(1).mig_enabled = true;
  t.mutable_gpu(1).mig_devices = {
      {"3g.40gb", "", -1, -1, 0}, {"2g.20gb", "", -1, -1, 0}, slice, slice};
  t.mutable_gpu(2).mig_enabled = true;
  NodeStatus n = Nodes()[2];  // gpu03: idle, GPU 5 unhealthy
  n.record.name = "mig01";
  n.record.topology_json = topo::TopologyToJson(t);
  // The devices as the server lists them, two of GPU 0's and GPU 1's 3g.40gb
  // held by jobs.
  for (int k = 0; k < 7; ++k) {
    n.mig_devices.push_back({0, "1g.10gb", "MIG-0" + std::to_string(k), 9728,
                             k == 2   ? 812
                             : k == 5 ? 813
                                      : 0});
  }
  n.mig_devices.push_back({1, "3g.40gb", "MIG-10", 39424, 77});
  n.mig_devices.push_back({1, "2g.20gb", "MIG-11", 19456, 0});
  n.mig_devices.push_back({1, "1g.10gb", "MIG-12", 9728, 0});
  n.mig_devices.push_back({1, "1g.10gb", "MIG-13", 9728, 0});
  const std::string pic = FormatGpuPicture(n);
  ExpectGolden("nodes_mig.txt", pic);
  for (const std::string_view line : SplitLines(pic)) EXPECT_LE(line.size(), 80u) << line;
  // Nodes without MIG: no such line.
  n.record.topology_json = topo::TopologyToJson(*topo::LoadPreset("hgx-h100"));
  n.mig_devices.clear();
  EXPECT_EQ(FormatGpuPicture(n).find("MIG"), std::string::npos);
}

// Burst nodes as Slurm shows nodes it powers: sinfo's suffixes, scontrol's flags.
TEST_F(SlurmFormat, BurstNodesShowTheirPower) {
  const std::pair<std::string, std::string> cases[] = {
      {"off", "idle~ IDLE+CLOUD+POWERED_DOWN"},
      {"resuming", "idle# IDLE+CLOUD+POWERING_UP"},
      {"suspending", "idle% IDLE+CLOUD+POWERING_DOWN"},
      {"resume-failed", "down~ DOWN+CLOUD+POWERED_DOWN"},
      {"on", "idle IDLE+CLOUD"},
      {"", "idle IDLE"},
  };
  for (const auto& [power, want] : cases) {
    NodeStatus n = Nodes()[2];  // gpu03: up and idle
    n.power = power;
    n.pool = power.empty() ? "" : "burst";
    if (power == "off" || power == "resume-failed")
      n.record.state = state::NodeState::kDown;
    EXPECT_EQ(NodeStateText(n, false) + " " + NodeStateFlags(n), want) << power;
  }
}

// `show node`'s line on its agent's clock: the offset, and what to do past 5 s.
TEST_F(SlurmFormat, ClockLine) {
  NodeStatus n = Nodes()[0];
  EXPECT_EQ(FormatClockLine(n),
            "  clock: unknown (its agent has not said since the server started)\n");
  n.clock_offset_ms = 12;
  EXPECT_EQ(FormatClockLine(n), "  clock: +0.01s off the server's\n");
  n.clock_offset_ms = -5000;
  EXPECT_EQ(FormatClockLine(n), "  clock: -5.00s off the server's\n");
  n.clock_offset_ms = 3600020;
  EXPECT_EQ(FormatClockLine(n),
            "  clock: +3600.02s off the server's: over 5s, fix the node's time sync "
            "(NTP)\n");
  // The picture's width, as its other lines (Nodes), for offsets under a day.
  n.clock_offset_ms = -(24 * 3600 * 1000 - 1);
  EXPECT_LE(FormatClockLine(n).size(), 81u) << FormatClockLine(n);
}

TEST_F(SlurmFormat, Pieces) {
  EXPECT_EQ(FormatElapsed(3), "0:03");
  EXPECT_EQ(FormatElapsed(12 * 60 + 30), "12:30");
  EXPECT_EQ(FormatElapsed(3 * kHour + 5 * kMinute), "3:05:00");
  EXPECT_EQ(FormatElapsed(2 * kDay + 4 * kHour), "2-04:00:00");
  EXPECT_EQ(FormatHms(3), "00:00:03");
  EXPECT_EQ(FormatHms(kDay + 1), "1-00:00:01");
  EXPECT_EQ(FormatSlurmLocal(kNow), "2026-11-29T19:18:05");
  EXPECT_EQ(CompressHostList({"gpu04", "gpu01", "gpu03"}), "gpu[01,03-04]");
  EXPECT_EQ(CompressHostList({"gpu02"}), "gpu02");
  EXPECT_EQ(CompressHostList({"n1", "n2", "n3", "n10", "login", "a-7"}),
            "a-7,login,n[1-3,10]");
  EXPECT_EQ(CompressHostList({"gpu10", "gpu09", "gpu08", "gpu100"}), "gpu[08-10,100]");
  EXPECT_EQ(CompressHostList({"n2", "n2", "n02"}), "n[2,02]");
  EXPECT_EQ(CompressHostList({}), "");
}

}  // namespace
}  // namespace hachi::cli
