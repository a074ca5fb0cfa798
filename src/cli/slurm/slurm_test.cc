// The Slurm front-ends' pure cores (cli/slurm/): argument parsing with Slurm's words,
// job-id lists, hostlists, and golden output of squeue, sinfo, sacct, scancel's
// requests and scontrol's blocks. Fixed records, fixed `now`, TZ=UTC; golden files in
// src/cli/testdata/slurm_*.txt (HACHI_UPDATE_GOLDEN=1 rewrites them).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/golden_testing.h"
#include "cli/slurm/sacct_format.h"
#include "cli/slurm/scancel_plan.h"
#include "cli/slurm/scontrol_update.h"
#include "cli/slurm/sinfo_format.h"
#include "cli/slurm/slurm_text.h"
#include "cli/slurm/squeue_format.h"
#include "cli/slurm/srun_plan.h"

namespace hachi::cli::slurm {
namespace {

using state::JobRecord;
using state::JobState;
using testing::ExpectGolden;

constexpr Time kNow = 1795979885;  // 2026-11-29T19:18:05Z, as in formats.txt

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }
};

class MakeJob {
 public:
  explicit MakeJob(state::JobId id) {
    j_.id = id;
    j_.req.user = "alice";
    j_.req.account = "ml";
    j_.req.partition = "gpu8";
    j_.req.time_limit = 5 * kMinute;
    j_.req.cpus_per_gpu = 8;
    j_.req.memory_mib_per_gpu = 61440;
    j_.req.gpus = 2;
    j_.spec.name = "train";
    j_.spec.workdir = "/home/alice";
    j_.spec.uid = 1000;
    j_.spec.gid = 1000;
    j_.spec.set_script("#!/bin/sh\ntrue\n");
    j_.submit_time = kNow - 100;
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
  MakeJob& Task(state::JobId array, int task) {
    j_.spec.array_job_id = array;
    j_.spec.array_task_id = task;
    return *this;
  }
  MakeJob& Reason(std::string r) {
    j_.reason = std::move(r);
    return *this;
  }
  MakeJob& Running(const std::string& node) {
    j_.state = JobState::kRunning;
    j_.start_time = kNow - 63;
    j_.allocations.push_back({node, GpuSet::FromIndices({0, 1}), 16, 122880, 0, 0});
    return *this;
  }
  MakeJob& Ended(JobState s, int exit_code = 0, int signal = 0) {
    if (j_.allocations.empty()) Running("gpu01");
    j_.state = s;
    j_.exit_code = exit_code;
    j_.signal = signal;
    j_.end_time = kNow - 3;
    return *this;
  }
  operator JobRecord() const { return j_; }

 private:
  JobRecord j_;
};

std::vector<JobRecord> Queue() {
  std::vector<JobRecord> q = {
      MakeJob(10).Name("prep").Ended(JobState::kCompleted),
      MakeJob(11).Name("bad").Ended(JobState::kFailed, 3),
      MakeJob(12).Name("killed").Ended(JobState::kCancelled).Reason("cancelled by alice"),
      MakeJob(13).Name("a-very-long-job-name").Running("gpu02"),
      MakeJob(14).Name("arr").Task(14, 0).Running("gpu03"),
      MakeJob(15).Name("arr").Task(14, 1).Reason("Resources"),
      MakeJob(16).Name("arr").Task(14, 2).Reason("Priority"),
      MakeJob(17).Name("arr").Task(14, 3).Reason("Priority"),
      MakeJob(18).Name("other").User("bob").Partition("gpu-shared").Reason("Priority"),
      MakeJob(19).Name("slow").Ended(JobState::kTimeout),
      MakeJob(20).Name("oom").Ended(JobState::kOutOfMemory, 0, 9),
  };
  q[8].req.constraint = "h100&ib";  // bob's: squeue's %f
  return q;
}

// ---- arguments ----

TEST(SlurmArgs, GetoptForms) {
  const std::vector<OptDef> defs = {
      {'n', "noheader", false}, {'u', "user", true}, {'o', "format", true}};
  Result<ParsedArgs> p =
      ParseArgs({"-nu", "bob", "--format=JobID", "-oState", "x"}, defs);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->Has("noheader"));
  EXPECT_EQ(p->Get("user"), "bob");
  EXPECT_EQ(p->Get("format"), "State");  // the last one wins
  EXPECT_EQ(p->positional, std::vector<std::string>{"x"});
  EXPECT_EQ(ParseArgs({"--frob"}, defs).status().message(),
            "unrecognized option '--frob'");
  EXPECT_EQ(ParseArgs({"-z"}, defs).status().message(), "invalid option -- 'z'");
  EXPECT_EQ(ParseArgs({"--user"}, defs).status().message(),
            "option '--user' requires an argument");
  Result<ParsedArgs> stop = ParseArgs({"-n", "cmd", "-u", "x"}, defs, true);
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(stop->positional, (std::vector<std::string>{"cmd", "-u", "x"}));
}

TEST(SlurmArgs, JobSelectors) {
  struct Case {
    const char* name;
    std::vector<std::string> words;
    std::vector<std::string> want;  // SelectorText of each; empty + error
    const char* error;
  };
  const Case cases[] = {
      {"plain", {"12"}, {"12"}, nullptr},
      {"task", {"12_3"}, {"12_3"}, nullptr},
      {"range", {"12_[1-3]"}, {"12_1", "12_2", "12_3"}, nullptr},
      {"list", {"12_[1,5]", "9"}, {"12_1", "12_5", "9"}, nullptr},
      {"junk", {"12x"}, {}, "Invalid job id 12x"},
      {"zero", {"0"}, {}, "Invalid job id 0"},
      {"bad range", {"12_[3-1]"}, {}, "Invalid job id 12_[3-1]"},
      {"bad task", {"12_x"}, {}, "Invalid job id 12_x"},
  };
  for (const Case& c : cases) {
    Result<std::vector<JobSelector>> r = ParseJobSelectors(c.words);
    if (c.error != nullptr) {
      EXPECT_EQ(r.status().message(), c.error) << c.name;
      continue;
    }
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().message();
    std::vector<std::string> got;
    for (const JobSelector& s : *r) got.push_back(SelectorText(s));
    EXPECT_EQ(got, c.want) << c.name;
  }
  JobRecord task = MakeJob(15).Task(14, 1);
  EXPECT_TRUE(Matches({14, -1}, task));
  EXPECT_TRUE(Matches({14, 1}, task));
  EXPECT_FALSE(Matches({14, 2}, task));
  EXPECT_TRUE(Matches({15, -1}, task));
}

TEST(SlurmArgs, SacctStates) {
  auto uid = [](const std::string& who) -> std::optional<uint32_t> {
    if (who == "root") return 0u;
    return std::nullopt;
  };
  EXPECT_EQ(
      SacctState(MakeJob(1).Ended(JobState::kCancelled).Reason("cancelled by root"), uid),
      "CANCELLED by 0");
  EXPECT_EQ(SacctState(
                MakeJob(1).Ended(JobState::kCancelled).Reason("cancelled by alice"), uid),
            "CANCELLED by 1000");  // the owner: the job's uid
  EXPECT_EQ(SacctState(MakeJob(1).Ended(JobState::kCancelled).Reason("preempted")),
            "PREEMPTED");
  EXPECT_EQ(SacctState(MakeJob(1).Ended(JobState::kOutOfMemory)), "OUT_OF_MEMORY");
  EXPECT_EQ(SacctState(MakeJob(1).Ended(JobState::kNodeFail)), "NODE_FAIL");
  EXPECT_EQ(SacctState(MakeJob(1).Ended(JobState::kTimeout)), "TIMEOUT");
  JobRecord requeued = MakeJob(1);
  requeued.requeues = 1;
  EXPECT_EQ(SacctState(requeued), "REQUEUED");
}

// ---- squeue ----

std::string Squeue(const std::vector<std::string>& args) {
  Result<SqueueOptions> o = ParseSqueueArgs(args, "alice");
  if (!o.ok()) return "error: " + o.status().message() + "\n";
  Result<std::string> t = RenderSqueue(*o, Queue(), kNow);
  return t.ok() ? *t : "error: " + t.status().message() + "\n";
}

TEST_F(Slurm, SqueueGolden) {
  std::string out;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"-r"},
           {"-h", "-u", "bob"},
           {"-t", "all", "-o", "%.8i %.10P %.10j %.8u %.2t %.10M %.6D %.12b %R"},
           {"-j", "14_2,13", "-O",
            "JobID,Name:12,State,StateCompact,TimeUsed,"
            "NumNodes,NodeList,Reason,tres-per-node,"
            "ArrayJobID,ArrayTaskID,tres-alloc:40"},
           {"--start"},
           {"-n", "arr", "--json"},
           {"-t", "bogus"},
           {"-O", "NoSuchField"},
           {"-t", "all", "-o", "%i %f", "-j", "13,18"},
           // %A: each element's own number; the pending tasks' row, its first's.
           {"-o", "%i|%A|%F|%K"},
       }) {
    out += "$ squeue";
    for (const std::string& a : args) out += " " + a;
    out += "\n" + Squeue(args);
  }
  ExpectGolden("slurm_squeue.txt", out);
}

TEST_F(Slurm, SqueueStartEstimates) {
  Result<SqueueOptions> o = ParseSqueueArgs({"--start", "-h", "-o", "%i %S %Y"}, "alice");
  ASSERT_TRUE(o.ok());
  StartEstimates starts = {{18, {kNow + 60, "gpu03"}}};
  Result<std::string> t = RenderSqueue(*o, Queue(), kNow, starts);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "18 2026-11-29T19:19:05 gpu03\n14_[1-3] N/A (null)\n");
}

// ---- sinfo ----

std::vector<state::NodeStatus> Nodes() {
  std::vector<state::NodeStatus> out;
  for (int i = 1; i <= 4; ++i) {
    state::NodeStatus n;
    n.record.name = "gpu0" + std::to_string(i);
    n.record.cpus = 64;
    n.record.memory_mib = 512000;
    n.record.state = state::NodeState::kUp;
    n.gpus = 8;
    n.gpu_model = "NVIDIA H100 80GB HBM3";
    n.partitions = {"gpu8", "gpu-shared"};
    n.gpu_jobs.assign(8, 0);
    n.gpu_share_milli.assign(8, 0);
    out.push_back(n);
  }
  out[0].gpu_jobs.assign(8, 13);  // all taken: alloc
  out[0].alloc_cpus = 64;
  out[1].gpu_jobs[0] = 14;  // mixed
  out[1].alloc_cpus = 16;
  out[3].record.state = state::NodeState::kDrained;
  out[3].record.state_reason = "bad fan";
  for (state::NodeStatus& n : out) n.features = {"h100", "nvlink"};
  out[3].features = {"h100", "ib", "nvlink"};
  return out;
}

std::vector<PartitionInfo> Partitions() {
  Result<std::vector<PartitionInfo>> p = PartitionsFromJson(
      R"({"partitions":[{"name":"gpu-shared","mode":"shared","nodes":["gpu01","gpu02","gpu03","gpu04"],"min_gpus":1,"max_gpus":4,"default_time":3600,"max_time":0},
                        {"name":"gpu8","mode":"whole-node","nodes":["gpu01","gpu02","gpu03","gpu04"],"min_gpus":8,"max_gpus":0,"default_time":3600,"max_time":604800},
                        {"name":"empty","nodes":[],"max_time":1800}]})");
  EXPECT_TRUE(p.ok());
  return p.ok() ? *p : std::vector<PartitionInfo>{};
}

TEST_F(Slurm, SinfoGolden) {
  std::string out;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"-o", "%P"},
           {"-h", "-o", "%P %D"},
           {"-N", "-o", "%N %G %C %T"},
           {"-o", "%n %G %C %c %m %f %E %t %l %a"},
           {"-p", "gpu8", "-s"},
           {"-N", "-O", "NodeList,Gres,CPUsState,StateLong:12"},
           {"-o", "%Q"},
           {"-o", "%P %f %D"},
           // No partition field: the nodes of both partitions, each once (Slurm's).
           {"-o", "%n %G %C"},
       }) {
    out += "$ sinfo";
    for (const std::string& a : args) out += " " + a;
    out += "\n";
    Result<SinfoOptions> o = ParseSinfoArgs(args);
    Result<std::string> t =
        o.ok() ? RenderSinfo(*o, Partitions(), Nodes()) : Result<std::string>(o.status());
    out += t.ok() ? *t : "error: " + t.status().message() + "\n";
  }
  ExpectGolden("slurm_sinfo.txt", out);
}

// ---- sacct ----

TEST_F(Slurm, SacctGolden) {
  auto uid = [](const std::string&) -> std::optional<uint32_t> { return std::nullopt; };
  std::string out;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"-X", "-a", "-o",
            "JobID,JobIDRaw,JobName%25,State%20,ExitCode,Elapsed,Start,End"},
           {"-P", "-n", "--format=JobIdRaw,State", "-j", "11"},
           {"-nu", "alice", "-o", "Account%20", "-X"},
           {"-p", "-j", "14_[0-1]", "-o",
            "JobID,State,NodeList,AllocTRES,ReqTRES,ReqMem,"
            "Timelimit,NNodes,AllocCPUS,Partition,User"},
           {"-a", "-s", "R,PD", "-X", "-o", "JobID,State,Reason,Submit"},
           {"-S", "2026-11-30", "-a"},
           {"-o", "JobID,Bogus"},
           {"-S", "tomorrowish"},
       }) {
    out += "$ sacct";
    for (const std::string& a : args) out += " " + a;
    out += "\n";
    Result<SacctOptions> o = ParseSacctArgs(args, kNow, "alice", false);
    Result<std::string> t =
        o.ok() ? RenderSacct(*o, Queue(), kNow, uid) : Result<std::string>(o.status());
    out += t.ok() ? *t : "error: " + t.status().message() + "\n";
  }
  ExpectGolden("slurm_sacct.txt", out);
}

TEST_F(Slurm, SacctTimes) {
  EXPECT_EQ(*ParseSacctTime("now", kNow), kNow);
  EXPECT_EQ(*ParseSacctTime("midnight", kNow), 1795910400);  // 2026-11-29T00:00:00Z
  EXPECT_EQ(*ParseSacctTime("now-2hours", kNow), kNow - 7200);
  EXPECT_EQ(*ParseSacctTime("2026-11-29T10:00", kNow), 1795910400 + 36000);
  EXPECT_EQ(*ParseSacctTime("11/28", kNow), 1795910400 - 86400);
  EXPECT_EQ(*ParseSacctTime("01:30", kNow), 1795910400 + 5400);
  EXPECT_FALSE(ParseSacctTime("yesterdayish", kNow).ok());
  // Without -j the window starts at midnight: job 1 ended the day before is left out.
  JobRecord old = MakeJob(1).Ended(JobState::kCompleted);
  old.end_time = 1795910400 - 10;
  Result<SacctOptions> o =
      ParseSacctArgs({"-X", "-n", "-o", "JobID"}, kNow, "alice", false);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(*RenderSacct(*o, {old}, kNow), "");
  o = ParseSacctArgs({"-X", "-n", "-o", "JobID", "-j", "1"}, kNow, "alice", false);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(*RenderSacct(*o, {old}, kNow), "1            \n");
}

// The usage fields from a job's usage summary, in Slurm's forms, on the job's
// line; empty where nothing was measured (and on its batch line).
TEST_F(Slurm, SacctUsageFields) {
  JobRecord one = MakeJob(1).Ended(JobState::kCompleted);
  one.usage.samples = 40;
  one.usage.gpu_util = 83.6;
  one.usage.cpu_seconds = 2472.25;  // 00:41:12
  one.usage.mem_peak_mib = 61000;
  one.gpu_memory_peak_mib = 1536;
  JobRecord gang = MakeJob(2).Running("gpu01");
  gang.allocations.push_back(gang.allocations[0]);
  gang.allocations[1].node = "gpu02";
  gang.usage.cpu_seconds = 2 * 90061;  // 1 day 1 h 1 min 1 s on each node
  gang.usage.mem_peak_mib = 2048;
  JobRecord none = MakeJob(3).Ended(JobState::kCompleted);  // never sampled
  Result<SacctOptions> o = ParseSacctArgs(
      {"-a", "-P", "-o",
       "JobID,TotalCPU,AveCPU,MaxRSS,TRESUsageInAve,TRESUsageInMax,TRESUsageInTot"},
      kNow, "alice", false);
  ASSERT_TRUE(o.ok()) << o.status().message();
  Result<std::string> t = RenderSacct(*o, {one, gang, none}, kNow);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t,
            "JobID|TotalCPU|AveCPU|MaxRSS|TRESUsageInAve|TRESUsageInMax|TRESUsageInTot\n"
            "1|41:12.250|00:41:12|61000M|cpu=00:41:12,gres/gpuutil=84|"
            "gres/gpumem=1.50G,mem=61000M|cpu=00:41:12\n"
            "1.batch||||||\n"
            "2|2-02:02:02|1-01:01:01|2G|cpu=1-01:01:01|mem=2G|cpu=2-02:02:02\n"
            "2.batch||||||\n"
            "3||||||\n"
            "3.batch||||||\n");
  // Slurm's default widths: right-aligned, cut with a '+'.
  o = ParseSacctArgs({"-a", "-X", "-o", "JobID,MaxRSS,TRESUsageInAve"}, kNow, "alice",
                     false);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(*RenderSacct(*o, {one}, kNow),
            "JobID            MaxRSS TRESUsageInAve \n"
            "------------ ---------- -------------- \n"
            "1                61000M cpu=00:41:12,+ \n");
}

// ---- scancel ----

TEST(Scancel, Plans) {
  struct Case {
    const char* name;
    std::vector<std::string> args;
    std::vector<std::string> want;  // "path body"
    const char* error;
  };
  const Case cases[] = {
      {"ids",
       {"12", "14_[1-2]"},
       {"/jobs/12/cancel ", "/jobs/14_1/cancel ", "/jobs/14_2/cancel "},
       nullptr},
      {"whole array", {"14"}, {"/jobs/14/cancel "}, nullptr},
      {"snakemake",
       {"12", "13", "--clusters=all"},
       {"/jobs/12/cancel ", "/jobs/13/cancel "},
       nullptr},
      {"signal name",
       {"-s", "SIGUSR1", "13"},
       {R"(/jobs/13/signal {"scope":"steps","signal":"USR1"})"},
       nullptr},
      {"signal number batch",
       {"--signal=10", "-b", "13"},
       {R"(/jobs/13/signal {"scope":"batch","signal":10})"},
       nullptr},
      {"signal full",
       {"--full", "-s", "USR2", "13"},
       {R"(/jobs/13/signal {"scope":"all","signal":"USR2"})"},
       nullptr},
      {"signal KILL goes to the batch step too",
       {"-s", "KILL", "13"},
       {R"(/jobs/13/signal {"scope":"all","signal":"KILL"})"},
       nullptr},
      {"full wins over batch",
       {"-b", "-f", "-s", "USR1", "13"},
       {R"(/jobs/13/signal {"scope":"all","signal":"USR1"})"},
       nullptr},
      {"user filter", {"-u", "bob"}, {"/jobs/18/cancel "}, nullptr},
      {"name and state",
       {"-n", "arr", "-t", "PD"},
       {"/jobs/14_1/cancel ", "/jobs/14_2/cancel ", "/jobs/14_3/cancel "},
       nullptr},
      {"ids and filter", {"14", "-t", "R"}, {"/jobs/14_0/cancel "}, nullptr},
      {"partition", {"-p", "gpu-shared", "-u", "alice"}, {}, nullptr},
      {"nothing", {}, {}, "No job identification provided"},
      {"help needs no job", {"--help"}, {}, nullptr},
      {"usage needs no job", {"--usage"}, {}, nullptr},
      {"bad id", {"12x"}, {}, "Invalid job id 12x"},
      {"bad signal", {"-s", "FROB", "1"}, {}, "Invalid job signal: FROB"},
  };
  for (const Case& c : cases) {
    Result<ScancelOptions> o = ParseScancelArgs(c.args, "alice");
    if (c.error != nullptr) {
      EXPECT_EQ(o.status().message(), c.error) << c.name;
      continue;
    }
    ASSERT_TRUE(o.ok()) << c.name << ": " << o.status().message();
    std::vector<std::string> got;
    for (const ScancelAction& a : PlanScancel(*o, Queue()))
      got.push_back(a.path + " " + a.body);
    EXPECT_EQ(got, c.want) << c.name;
  }
}

// ---- scontrol ----

// scontrol update: Field=Value words -> POST /jobs/ID/update's body.
TEST(ScontrolUpdate, WordsAndBodies) {
  Result<UpdateWords> w =
      ParseUpdateWords({"JobId=12,13_[1,3]", "timelimit=1:00:00", "Nice"});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->jobs.size(), 3u);
  EXPECT_EQ(SelectorText(w->jobs[0]), "12");
  EXPECT_EQ(SelectorText(w->jobs[2]), "13_3");
  ASSERT_EQ(w->fields.size(), 2u);
  EXPECT_EQ(ParseUpdateWords({"TimeLimit=5"}).status().message(),
            "No job identification provided (give JobId=ID)");
  EXPECT_EQ(ParseUpdateWords({"JobId=5"}).status().message(), "No changes specified");
  EXPECT_EQ(ParseUpdateWords({"JobId=5", "Shared=yes"})
                .status()
                .message()
                .rfind("Update of this parameter is not supported: Shared=yes", 0),
            0u);
  EXPECT_FALSE(ParseUpdateWords({"JobId=5", "TimeLimit"}).ok());
  EXPECT_FALSE(ParseUpdateWords({"JobId=x1", "TimeLimit=5"}).ok());

  JobRecord job;
  job.id = 12;
  job.req.gpus_per_node = 4;
  job.req.nodes = 2;
  job.req.gpus = 8;
  job.req.time_limit = 3600;
  auto body = [&](std::vector<std::pair<std::string, std::string>> fields) {
    Result<std::string> b = UpdateBody(fields, job, kNow, 0);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? nlohmann::json::parse(*b) : nlohmann::json();
  };
  EXPECT_EQ(body({{"TimeLimit", "30"}})["req"]["time_limit"], 1800);
  EXPECT_EQ(body({{"TimeLimit", "+30"}})["req"]["time_limit"], 5400);
  EXPECT_EQ(body({{"TimeLimit", "-0:30:00"}})["req"]["time_limit"], 1800);
  EXPECT_EQ(body({{"TimeLimit", "UNLIMITED"}})["req"]["time_limit"], -1);
  EXPECT_EQ(body({{"JobName", "renamed"}, {"Comment", ""}}),
            nlohmann::json::parse(R"({"name": "renamed", "comment": ""})"));
  // NumNodes alone keeps 4 GPUs per node; Gres alone keeps 2 nodes.
  nlohmann::json n = body({{"NumNodes", "3"}})["req"];
  EXPECT_EQ(n["nodes"], 3);
  EXPECT_EQ(n["gpus"], 12);
  nlohmann::json g = body({{"Gres", "gpu:h100:2"}})["req"];
  EXPECT_EQ(g["nodes"], 2);
  EXPECT_EQ(g["gpus"], 4);
  EXPECT_EQ(g["gpu_model"], "h100");
  EXPECT_EQ(body({{"TresPerNode", "gres/gpu:8"}, {"NumNodes", "1"}})["req"]["gpus"], 8);
  EXPECT_EQ(body({{"Features", "h100&ib"}})["req"]["constraint"], "h100&ib");
  EXPECT_EQ(body({{"Features", ""}})["req"]["constraint"], "");
  EXPECT_EQ(body({{"Dependency", "afterok:3:4"}})["req"]["dependencies"],
            nlohmann::json::parse(
                R"([{"kind": "afterok", "job": 3}, {"kind": "afterok", "job": 4}])"));
  EXPECT_EQ(body({{"Dependency", ""}})["req"]["dependencies"], nlohmann::json::array());
  EXPECT_EQ(body({{"Nice", ""}})["req"]["nice"], 100);
  EXPECT_EQ(body({{"StartTime", "now+1hour"}})["req"]["begin_time"], kNow + 3600);
  EXPECT_EQ(body({{"StartTime", "now"}})["req"]["begin_time"], 0);
  EXPECT_EQ(body({{"MinMemoryNode", "64G"}})["req"]["memory_mib"], 65536);
  EXPECT_EQ(body({{"ExcNodeList", "gpu[01-02]"}})["req"]["exclude"], "gpu[01-02]");

  auto error = [&](std::vector<std::pair<std::string, std::string>> fields) {
    Result<std::string> b = UpdateBody(fields, job, kNow, 0);
    return b.ok() ? std::string("(accepted)") : b.status().message();
  };
  EXPECT_EQ(error({{"TimeLimit", "9x"}}).rfind("TimeLimit=9x: ", 0), 0u);
  EXPECT_NE(error({{"TimeLimit", "-2:00:00"}}).find("below 1 minute"), std::string::npos);
  job.req.time_limit = 0;  // none: nothing to count from
  EXPECT_NE(error({{"TimeLimit", "+30"}}).find("has no time limit"), std::string::npos);
  job.req.time_limit = 3600;
  EXPECT_EQ(error({{"Features", "h100&("}}).rfind("Features=h100&(: ", 0), 0u);
  EXPECT_EQ(error({{"NumNodes", "two"}}).rfind("NumNodes=two: ", 0), 0u);
  EXPECT_EQ(error({{"Partition", ""}}).rfind("Partition=: ", 0), 0u);
  EXPECT_EQ(error({{"JobName", ""}}), "JobName=: empty job name");
}

// scontrol update NodeName=: drain or resume each node, Slurm's refusals word for word.
TEST(ScontrolUpdate, NodeStates) {
  EXPECT_TRUE(IsNodeUpdate({"NodeName=gpu01", "State=DRAIN"}));
  EXPECT_FALSE(IsNodeUpdate({"JobId=3", "TimeLimit=5"}));
  Result<NodeUpdate> d =
      ParseNodeUpdate({"NodeName=gpu[01-02]", "State=drain", "Reason=\"bad fan\""});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->nodes, (std::vector<std::string>{"gpu01", "gpu02"}));
  EXPECT_TRUE(d->drain);
  EXPECT_EQ(d->reason, "bad fan");
  // A prefix of three letters or more, in update_node.c's order: "RES" is RESUME.
  for (const char* st : {"RESUME", "res", "Undrain", "IDLE"}) {
    Result<NodeUpdate> r =
        ParseNodeUpdate({"NodeName=gpu01", std::string("State=") + st});
    ASSERT_TRUE(r.ok()) << st << ": " << r.status().ToString();
    EXPECT_FALSE(r->drain) << st;
  }
  EXPECT_TRUE(ParseNodeUpdate({"NodeName=gpu01", "State=FAIL", "Reason=x"})->drain);
  EXPECT_EQ(ParseNodeUpdate({"NodeName=gpu01", "State=DRAIN"}).status().message(),
            "You must specify a reason when DOWNING or DRAINING a node. Request denied");
  EXPECT_EQ(ParseNodeUpdate({"NodeName=gpu01", "State=BOGUS"}).status().message(),
            "Invalid input: State=BOGUS\nRequest aborted\nValid states are: NoResp DRAIN "
            "FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN\nNot all states are valid "
            "given a node's prior state");
  EXPECT_EQ(ParseNodeUpdate({"NodeName=gpu01", "Weight=5"}).status().message(),
            "Update of this parameter is not supported: Weight=5\nRequest aborted");
  EXPECT_EQ(ParseNodeUpdate({"NodeName=gpu01"}).status().message(),
            "No changes specified");
  EXPECT_NE(ParseNodeUpdate({"NodeName=gpu01", "State=DOWN", "Reason=x"})
                .status()
                .message()
                .find("a node is down when its agent falls silent"),
            std::string::npos);
  EXPECT_NE(ParseNodeUpdate({"NodeName=gpu01", "State=POWER_DOWN"})
                .status()
                .message()
                .find("Hachi sets no such node state"),
            std::string::npos);
  EXPECT_EQ(ParseNodeUpdate({"NodeName=gpu[2-1]", "State=RESUME"}).status().message(),
            "slurm_update error: Invalid node name specified");
}

TEST_F(Slurm, ScontrolGolden) {
  std::string out;
  for (const PartitionInfo& p : Partitions()) out += FormatShowPartition(p, Nodes());
  for (const state::NodeStatus& n : Nodes()) out += FormatShowNode(n);
  out += FormatShowConfig(kNow, "unix:/run/hachi.sock", Partitions());
  ExpectGolden("slurm_scontrol.txt", out);
}

TEST_F(Slurm, ScontrolShowConfigNamesEachController) {
  const std::string out =
      FormatShowConfig(kNow, "http://ctl1:8686, http://ctl2:8686", Partitions());
  EXPECT_NE(out.find("SlurmctldHost[0]       = http://ctl1:8686\n"
                     "SlurmctldHost[1]       = http://ctl2:8686\n"),
            std::string::npos)
      << out;
}

// ---- srun ----

TEST(SrunArgs, InsideAnAllocationTheStepTakesItsDefaultsFromTheEnvironment) {
  const state::EnvList env = {
      {"SLURM_JOB_ID", "12"}, {"SLURM_NTASKS", "4"}, {"PATH", "/bin"}};
  Result<SrunOptions> o =
      ParseSrunArgs({"-l", "--kill-on-bad-exit", "hostname", "-f"}, env, "/home/a");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->job, 12);
  EXPECT_TRUE(o->label);
  EXPECT_TRUE(o->step.kill_on_bad_exit);
  EXPECT_EQ(o->step.argv, (std::vector<std::string>{"hostname", "-f"}));
  EXPECT_EQ(o->step.ntasks, 4);  // SLURM_NTASKS
  EXPECT_EQ(o->step.workdir, "/home/a");
  EXPECT_EQ(o->step.env, env);
  // -N without -n: SLURM_NTASKS does not apply (one task per node).
  o = ParseSrunArgs({"-N", "2", "true"}, env, "/");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->step.nodes, 2);
  EXPECT_EQ(o->step.ntasks, 0);
  // --jobid wins over the environment; -D is relative to the working directory.
  o = ParseSrunArgs({"--jobid=30", "--overlap", "-D", "sub", "-w", "n[1-2]", "true"}, env,
                    "/home/a");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->job, 30);
  EXPECT_TRUE(o->step.overlap);
  EXPECT_EQ(o->step.workdir, "/home/a/sub");
  EXPECT_EQ(o->step.node_list, (std::vector<std::string>{"n1", "n2"}));
}

TEST(SrunArgs, GpusAndExportAndErrors) {
  const state::EnvList env = {{"HACHI_JOB_ID", "7"}, {"SECRET", "x"}, {"SLURM_A", "1"}};
  Result<SrunOptions> o = ParseSrunArgs({"-n", "2", "-G", "2", "true"}, env, "/");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->job, 7);
  EXPECT_EQ(o->step.gpus_per_task, 1);
  EXPECT_EQ(ParseSrunArgs({"-n", "2", "-G", "3", "true"}, env, "/").status().code(),
            StatusCode::kInvalidArgument);
  o = ParseSrunArgs({"--export=NONE", "true"}, env, "/");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->step.env, (state::EnvList{{"HACHI_JOB_ID", "7"}, {"SLURM_A", "1"}}));
  o = ParseSrunArgs({"--export=ALL,EXTRA=1", "true"}, env, "/");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->step.env.back(), (std::pair<std::string, std::string>{"EXTRA", "1"}));
  EXPECT_EQ(ParseSrunArgs({"-n", "x", "true"}, env, "/").status().message(),
            "Invalid numeric value \"x\" for --ntasks.");
  EXPECT_EQ(ParseSrunArgs({"-n", "2"}, env, "/").status().message(),
            "No command given to execute.");
  // Outside an allocation: no job; the options go to the allocation.
  o = ParseSrunArgs({"-p", "gpu8", "-n", "2", "true"}, {}, "/");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->job, 0);
  EXPECT_EQ(o->alloc_args, (std::vector<std::string>{"--partition=gpu8", "--ntasks=2"}));
}

TEST(SrunOutput, LabelsEachLineOnceAcrossChunks) {
  OutputLabeler l(true);
  auto [o1, e1] = l.Feed({3, 1, "hel", 0});
  EXPECT_EQ(o1, "");
  auto [o2, e2] = l.Feed({3, 1, "lo\nwor", 0});
  EXPECT_EQ(o2, "3: hello\n");
  auto [o3, e3] = l.Feed({0, 2, "err\n", 0});
  EXPECT_EQ(e3, "0: err\n");
  auto [o4, e4] = l.Flush();
  EXPECT_EQ(o4, "3: wor\n");
  OutputLabeler raw(false);
  EXPECT_EQ(raw.Feed({3, 1, "as is", 0}).first, "as is");
  EXPECT_NE(
      raw.Feed({3, 1, "", 100}).second.find("100 bytes of task 3's stdout were lost"),
      std::string::npos);
}

TEST(LostOutput, CountsEveryLossAndFailsACleanExit) {
  LostOutput none;
  EXPECT_EQ(none.Line("hachi run"), "");
  EXPECT_EQ(none.ExitStatus(0), 0);
  LostOutput lost;
  api::StepOutput out;
  out.lost = 10;  // dropped below the reader's offset
  out.chunks = {{0, 1, "kept", 0}, {1, 2, "", 32}};
  lost.Count(out);
  lost.Count(api::StepOutput{});
  EXPECT_EQ(lost.bytes(), 42);
  EXPECT_EQ(lost.Line("hachi run").rfind("hachi run: 42 bytes of output lost (", 0), 0u);
  EXPECT_EQ(lost.ExitStatus(0), 1);
  EXPECT_EQ(lost.ExitStatus(3), 3);  // a failing task's status says more
}

TEST(SrunExit, WorstTaskAndSlurmsErrorLines) {
  using api::ExitKind;
  const std::vector<api::TaskExit> exits = {{0, ExitKind::kExited, 0, 0, "", "n1"},
                                            {1, ExitKind::kExited, 2, 0, "", "n1"},
                                            {2, ExitKind::kExited, 2, 0, "", "n1"},
                                            {3, ExitKind::kExited, 2, 0, "", "n1"},
                                            {4, ExitKind::kSignaled, 0, 9, "", "n2"}};
  EXPECT_EQ(SrunExitStatus(exits), 137);
  EXPECT_EQ(
      TaskErrorLines(exits),
      (std::vector<std::string>{"srun: error: n1: tasks 1-3: Exited with exit code 2",
                                "srun: error: n2: task 4: Killed"}));
  EXPECT_EQ(SrunExitStatus({{0, ExitKind::kExited, 0, 0, "", "n1"}}), 0);
  EXPECT_EQ(
      SrunExitStatus({{0, ExitKind::kLaunchFailed, 0, 0, "exec x: No such file", ""}}),
      2);
}

}  // namespace
}  // namespace hachi::cli::slurm
