// scontrol show assoc_mgr as Slurm 22.05 prints it (src/scontrol/info_assoc_mgr.c),
// from what a server would send.
#include "cli/slurm/assoc_mgr_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hachi::cli::slurm {
namespace {

constexpr Time kNow = 1'000'000;

report::PriorityReport Report() {
  report::PriorityReport r;
  r.now = kNow;
  r.accounts = {{"chem", 1, 0.25, 0, 0, 1.0}, {"physics", 3, 0.75, 7200, 1.0, 0.25}};
  r.usage_total = 7200;
  r.users = {{"physics", "alice", 7200}};
  r.account_list = {{"chem", {}, -1}, {"physics", {"alice"}, 16}};
  r.user_list = {{"alice", 8, false}, {"root", -1, true}};
  r.qos = {{"high", 500, 3600}};
  return r;
}

std::vector<state::JobRecord> Jobs() {
  state::JobRecord running;
  running.id = 1;
  running.state = state::JobState::kRunning;
  running.req.account = "physics";
  running.req.user = "alice";
  running.req.qos = "high";
  running.req.gpus = 8;
  running.req.time_limit = 3600;
  running.start_time = kNow - 600;  // 3,000 s left
  running.allocations = {
      {"n1", GpuSet::FromIndices({0, 1, 2, 3, 4, 5, 6, 7}), 16, 65536}};
  state::JobRecord held;
  held.id = 2;
  held.req.account = "physics";
  held.req.user = "alice";
  held.req.gpus = 2;
  held.held = true;
  state::JobRecord waits;
  waits.id = 3;
  waits.req.account = "chem";
  waits.req.user = "bob";
  waits.req.gpus = 1;
  state::JobRecord ended;  // not counted
  ended.id = 4;
  ended.state = state::JobState::kCompleted;
  ended.req.account = "chem";
  ended.req.user = "bob";
  return {running, held, waits, ended};
}

std::optional<uint32_t> Uid(const std::string& name) {
  if (name == "root") return 0;
  if (name == "alice") return 1000;
  return std::nullopt;
}

std::string Render(const std::vector<std::string>& words) {
  Result<AssocMgrOptions> o = ParseAssocMgrArgs(words);
  EXPECT_TRUE(o.ok()) << o.status().message();
  return o.ok() ? RenderAssocMgr(*o, Report(), Jobs(), kNow, Uid) : "";
}

// What the running job holds and has left, in Slurm's TRES order.
constexpr char kRunning[] =
    "cpu=N(16),mem=N(65536),energy=N(0),node=N(1),billing=N(16),fs/disk=N(0),vmem=N(0),"
    "pages=N(0),gres/gpu=";
constexpr char kRunMins[] =
    "    GrpTRESRunMins=cpu=N(800),mem=N(3276800),energy=N(0),node=N(50),billing=N(800),"
    "fs/disk=N(0),vmem=N(0),pages=N(0),gres/gpu=N(400)\n";
constexpr char kNoMax[] =
    "    MaxJobs= MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=\n"
    "    MaxTRESPJ=\n"
    "    MaxTRESPN=\n"
    "    MaxTRESMinsPJ=\n"
    "    MinPrioThresh=\n";

TEST(AssocMgr, UsersAssociationsAndQosAsSlurmPrintsThem) {
  const std::string none =
      "cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/disk=N(0),vmem=N(0),"
      "pages=N(0),gres/gpu=N(0)";
  const std::string expected =
      std::string(
          "Current Association Manager state\n"
          "\n"
          "User Records\n"
          "\n"
          "UserName=alice(1000) DefAccount=alice DefWckey= AdminLevel=None\n"
          "UserName=root(0) DefAccount=root DefWckey= AdminLevel=Administrator\n"
          "\n"
          "Association Records\n"
          "\n"
          "ClusterName= Account=root UserName= Partition= Priority=0 ID=1\n"
          "    SharesRaw/Norm/Level/Factor=1/1.00/1/1.00\n"
          "    UsageRaw/Norm/Efctv=7200.00/1.00/1.00\n"
          "    ParentAccount= Lft=1 DefAssoc=No\n"
          "    GrpJobs=N(1) GrpJobsAccrue=N(1)\n"
          "    GrpSubmitJobs=N(3) GrpWall=N(0.00)\n"
          "    GrpTRES=") +
      kRunning + "N(8)\n" + "    GrpTRESMins=gres/gpu=N(120)\n" + kRunMins + kNoMax +
      "ClusterName= Account=chem UserName= Partition= Priority=0 ID=2\n"
      "    SharesRaw/Norm/Level/Factor=1/0.25/4/1.00\n"
      "    UsageRaw/Norm/Efctv=0.00/0.00/0.00\n"
      "    ParentAccount=root(1) Lft=2 DefAssoc=No\n"
      "    GrpJobs=N(0) GrpJobsAccrue=N(1)\n"
      "    GrpSubmitJobs=N(1) GrpWall=N(0.00)\n"
      "    GrpTRES=" +
      none + "\n    GrpTRESMins=gres/gpu=N(0)\n    GrpTRESRunMins=" + none + "\n" +
      kNoMax +
      "ClusterName= Account=physics UserName= Partition= Priority=0 ID=3\n"
      "    SharesRaw/Norm/Level/Factor=3/0.75/4/0.25\n"
      "    UsageRaw/Norm/Efctv=7200.00/1.00/1.00\n"
      "    ParentAccount=root(1) Lft=4 DefAssoc=No\n"
      "    GrpJobs=N(1) GrpJobsAccrue=N(0)\n"
      "    GrpSubmitJobs=N(2) GrpWall=N(0.00)\n"
      "    GrpTRES=" +
      kRunning + "16(8)\n" + "    GrpTRESMins=gres/gpu=N(120)\n" + kRunMins + kNoMax +
      "ClusterName= Account=physics UserName=alice(1000) Partition= Priority=0 ID=4\n"
      "    SharesRaw/Norm/Level/Factor=2147483647/0.75/4/0.25\n"
      "    UsageRaw/Norm/Efctv=7200.00/1.00/1.00\n"
      "    ParentAccount= Lft=5 DefAssoc=No\n"
      "    GrpJobs=N(1) GrpJobsAccrue=N(0)\n"
      "    GrpSubmitJobs=N(2) GrpWall=N(0.00)\n"
      "    GrpTRES=" +
      kRunning + "8(8)\n" + "    GrpTRESMins=gres/gpu=N(120)\n" + kRunMins + kNoMax +
      "\n"
      "QOS Records\n"
      "\n"
      "QOS=high(1)\n"
      "    UsageRaw=3600.000000\n"
      "    GrpJobs=N(1) GrpJobsAccrue=N(0) GrpSubmitJobs=N(1) GrpWall=N(0.00)\n"
      "    GrpTRES=" +
      kRunning + "N(8)\n" + "    GrpTRESMins=gres/gpu=N(60)\n" + kRunMins +
      "    MaxWallPJ=\n"
      "    MaxTRESPJ=\n"
      "    MaxTRESPN=\n"
      "    MaxTRESMinsPJ=\n"
      "    MinPrioThresh= \n"
      "    MinTRESPJ=\n"
      "    PreemptMode=OFF\n"
      "    Priority=500\n"
      "    Account Limits\n"
      "        No Accounts\n"
      "    User Limits\n"
      "        No Users\n";
  EXPECT_EQ(Render({}), expected);
}

TEST(AssocMgr, FiltersAndFlags) {
  // users=: that user's record and associations only.
  const std::string alice = Render({"users=alice", "flags=users,assoc"});
  EXPECT_EQ(alice.find("UserName=root(0) DefAccount"), std::string::npos) << alice;
  EXPECT_NE(alice.find("UserName=alice(1000) DefAccount"), std::string::npos) << alice;
  EXPECT_EQ(alice.find("Account=root "), std::string::npos) << alice;
  EXPECT_NE(alice.find("Account=physics UserName=alice(1000) "), std::string::npos);
  EXPECT_EQ(alice.find("QOS Records"), std::string::npos);
  // accounts=, any prefix of the tag, a user without a uid here.
  const std::string chem = Render({"acc=chem", "fl=Assoc"});
  EXPECT_EQ(chem.rfind("Current Association Manager state\n\nAssociation Records\n\n"
                       "ClusterName= Account=chem UserName= ",
                       0),
            0u)
      << chem;
  EXPECT_EQ(chem.find("ID=3"), std::string::npos);
  // A filter that matches nothing says so, as the controller's empty list does.
  EXPECT_EQ(Render({"qos=normal", "flags=qos"}),
            "Current Association Manager state\n\nNo QOS currently cached in Slurm.\n\n");
  EXPECT_EQ(
      Render({"users=carol", "flags=users"}),
      "Current Association Manager state\n\nNo users currently cached in Slurm.\n\n");
}

TEST(AssocMgr, BadWordsInScontrolsWords) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"users="}, "No value given for option users="},
      {{"users"}, "No value given for option users"},
      {{"flags=jobs"},
       "invalid flag 'jobs', valid options are 'Assoc, QOS, and/or Users'"},
      {{"nodes=n1"}, "invalid entity: nodes=n1 for keyword:show assoc_mgr"},
  };
  for (const auto& [words, error] : cases) {
    Result<AssocMgrOptions> o = ParseAssocMgrArgs(words);
    ASSERT_FALSE(o.ok()) << words[0];
    EXPECT_EQ(o.status().message(), error);
  }
}

}  // namespace
}  // namespace hachi::cli::slurm
