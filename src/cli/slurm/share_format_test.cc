// sshare, sprio, sacctmgr and sstat as Slurm 22.05 prints them (print_fields.c; sprio's
// print.c), from what a server would send.
#include "cli/slurm/share_format.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <string>
#include <vector>

#include "cli/slurm/sacctmgr_format.h"
#include "cli/slurm/sreport_format.h"
#include "cli/slurm/sstat_format.h"

namespace hachi::cli::slurm {
namespace {

report::PriorityReport Report() {
  report::PriorityReport r;
  r.now = 1'767'225'600;
  r.half_life = 7 * 86400;
  r.accounts = {{"chem", 1, 0.5, 0, 0, 1.0}, {"physics", 1, 0.5, 28800.4, 1.0, 0.25}};
  r.usage_total = 28800.4;
  r.users = {{"chem", "bob", 0}, {"physics", "alice", 28800.4}};
  report::JobPriorityRow a;
  a.id = 12;
  a.user = "bob";
  a.account = "chem";
  a.partition = "gpu8";
  a.terms = {12.4, 10000, 0, 0, 500, 0};
  a.priority = a.terms.Total();
  report::JobPriorityRow b;
  b.id = 11;
  b.user = "alice";
  b.account = "physics";
  b.partition = "gpu8";
  b.terms = {14, 2500, 0, 0, 500, 0};
  b.priority = b.terms.Total();
  r.jobs = {a, b};  // the order's: highest first
  r.account_list = {{"chem", {"bob"}, 16}, {"physics", {}, -1}};
  r.user_list = {{"alice", -1, false}, {"bob", 8, false}, {"root", -1, true}};
  r.qos = {{"high", 700, 3600.5}, {"normal", 0, 0}};
  return r;
}

std::string Sshare(const std::vector<std::string>& args,
                   const std::string& me = "alice") {
  Result<SshareOptions> o = ParseSshareArgs(args, me);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  if (!o.ok()) return "";
  Result<std::string> t = RenderSshare(*o, Report());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : "";
}

std::string Sprio(const std::vector<std::string>& args,
                  const report::PriorityReport& r = Report()) {
  Result<SprioOptions> o = ParseSprioArgs(args);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  if (!o.ok()) return "";
  Result<std::string> t = RenderSprio(*o, r);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : "";
}

TEST(Sshare, TheCallersRowsUnderEveryAccountInSlurmsColumns) {
  EXPECT_EQ(Sshare({}),
            "Account                    User  RawShares  NormShares    RawUsage  "
            "EffectvUsage  FairShare \n"
            "-------------------- ---------- ---------- ----------- ----------- "
            "------------- ---------- \n"
            "root                                          1.000000       28800      "
            "1.000000            \n"
            " chem                                    1    0.500000           0      "
            "0.000000   1.000000 \n"
            " physics                                 1    0.500000       28800      "
            "1.000000   0.250000 \n"
            "  physics                 alice     parent    0.500000       28800      "
            "1.000000   0.250000 \n");
}

TEST(Sshare, ParsableAllUsersAndChosenFields) {
  EXPECT_EQ(Sshare({"-a", "-P", "-n"}),
            "root|||1.000000|28800|1.000000|\n"
            " chem||1|0.500000|0|0.000000|1.000000\n"
            "  chem|bob|parent|0.500000|0|0.000000|1.000000\n"
            " physics||1|0.500000|28800|1.000000|0.250000\n"
            "  physics|alice|parent|0.500000|28800|1.000000|0.250000\n");
  // -p ends every field, the header's too; -o takes prefixes and widths.
  EXPECT_EQ(Sshare({"-p", "-A", "chem", "-u", "bob", "-o", "acc,user,fairs"}),
            "Account|User|FairShare|\n chem||1.000000|\n  chem|bob|1.000000|\n");
  EXPECT_EQ(Sshare({"-U", "-o", "User%4,RawU%5", "-n"}), "ali+ 28800 \n")
      << "a string cut with '+', a number never";
  // -l: NormUsage, and the TRES-minute columns Hachi has no figures for, blank.
  const std::string tres(30, ' ');
  EXPECT_EQ(
      Sshare({"-l", "-n", "-A", "physics"}),
      " physics                                 1    0.500000       28800    1.000000"
      "      1.000000   0.250000 " +
          tres + " " + tres +
          " \n"
          "  physics                 alice     parent    0.500000       28800    1.000000"
          "      1.000000   0.250000 " +
          tres + " " + tres + " \n");
}

TEST(Sshare, BadFieldsAndOptionsInSlurmsWords) {
  Result<SshareOptions> o = ParseSshareArgs({"-o", "Account,Bogus"}, "alice");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().message(), "Invalid field requested: \"Bogus\"");
  EXPECT_FALSE(ParseSshareArgs({"--nope"}, "alice").ok());
}

TEST(Sprio, EveryPendingJobsWeightedTermsByJobId) {
  EXPECT_EQ(
      Sprio({}),
      "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    "
      "JOBSIZE  PARTITION        QOS\n"
      "             11 gpu8            3014          0         14       2500        "
      "500          0          0\n"
      "             12 gpu8           10512          0         12      10000        "
      "500          0          0\n");
  // -S -Y: highest priority first; -u adds the user column; -h no header.
  EXPECT_EQ(Sprio({"-h", "-S", "-Y", "-u", "alice,bob", "-o", "%.5i %.8u %Y"}),
            "   12      bob 10512\n   11    alice 3014\n");
}

TEST(Sprio, WeightsNormalisedAndAFactorWithoutWeight) {
  report::PriorityReport r = Report();
  r.weights.qos = 0;  // a zero weight's column leaves the short format
  EXPECT_EQ(
      Sprio({"-w"}, r),
      "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    "
      "JOBSIZE  PARTITION\n"
      "        Weights                               1       1000      10000        "
      "500     100000\n");
  EXPECT_EQ(Sprio({"-n", "-h", "-j", "11"}, r),
            "             11 gpu8      0.00000070 0.0140000  0.2500000  1.0000000  "
            "0.0000000 \n");
}

TEST(Sprio, NoMatchAndBasicPriorityInSlurmsWords) {
  EXPECT_EQ(Sprio({"-j", "99"}), "Unable to find jobs matching user/id(s) specified\n");
  report::PriorityReport fifo = Report();
  fifo.multifactor = false;
  Result<SprioOptions> o = ParseSprioArgs({});
  ASSERT_TRUE(o.ok());
  Result<std::string> t = RenderSprio(*o, fifo);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "You are not running a supported priority plugin\n(priority/basic).\n"
            "Only 'priority/multifactor' is supported.");
  EXPECT_EQ(
      ParseSprioArgs({"-o", "%i", "-l"}).status().message(),
      "Options -o(--format) and -l(--long) are mutually exclusive. Please remove one "
      "and retry.");
  EXPECT_EQ(ParseSprioArgs({"-o", "%i %Z"}).status().message(),
            "Invalid job format specification: Z");
}

std::string Sacctmgr(const std::vector<std::string>& args) {
  Result<SacctmgrOptions> o = ParseSacctmgrArgs(args);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  if (!o.ok()) return "";
  Result<std::string> t = RenderSacctmgr(*o, Report());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : "";
}

TEST(Sacctmgr, ShowsTheConfigsTreeInSlurmsColumns) {
  EXPECT_EQ(Sacctmgr({"show", "account"}),
            "   Account                Descr                  Org \n"
            "---------- -------------------- -------------------- \n"
            "      root default root account                 root \n"
            "      chem                 chem                 chem \n"
            "   physics              physics              physics \n");
  EXPECT_EQ(Sacctmgr({"-nP", "list", "users"}),
            "alice|alice|None\nbob|bob|None\nroot|root|Administrator\n");
  EXPECT_EQ(Sacctmgr({"-n", "show", "user", "root", "format=User,Admin"}),
            "      root Administ+ \n");  // a bare word names, as name= does
  EXPECT_EQ(Sacctmgr({"-n", "show", "user", "name=root", "format=User,Admin"}),
            "      root Administ+ \n");
  EXPECT_EQ(Sacctmgr({"-P", "show", "assoc", "format=Account,User,Share,GrpTRES"}),
            "Account|User|Share|GrpTRES\n"
            "root||1|\n"
            "chem||1|gres/gpu=16\n"
            "chem|bob|parent|gres/gpu=8\n"
            "physics||1|\n"
            "physics|alice|parent|\n");
  EXPECT_EQ(Sacctmgr({"-nP", "show", "assoc", "where", "user=bob", "format=acc,user"}),
            "chem|bob\n");
  EXPECT_EQ(
      Sacctmgr({"-p", "show", "qos", "format=Name,Priority,PreemptMode,UsageFactor"}),
      "Name|Priority|PreemptMode|UsageFactor|\n"
      "high|700|cluster|1.000000|\nnormal|0|cluster|1.000000|\n");
  const std::string assoc = Sacctmgr({"show", "assoc"});
  EXPECT_EQ(
      assoc.substr(0, assoc.find('\n')),
      "   Cluster    Account       User  Partition     Share   Priority GrpJobs       "
      "GrpTRES GrpSubmit     GrpWall   GrpTRESMins MaxJobs       MaxTRES MaxTRESPerNode "
      "MaxSubmit     MaxWall   MaxTRESMins                  QOS   Def QOS "
      "GrpTRESRunMin ");
}

TEST(Sacctmgr, ChangesAreTheConfigsAndMistakesAreNamed) {
  Result<SacctmgrOptions> add = ParseSacctmgrArgs({"-i", "add", "account", "x"});
  ASSERT_FALSE(add.ok());
  EXPECT_EQ(add.status().code(), StatusCode::kUnsatisfiable);
  EXPECT_NE(add.status().message().find("edit the file and restart the server"),
            std::string::npos);
  EXPECT_EQ(ParseSacctmgrArgs({"show", "cluster"}).status().message(),
            "Unknown entity: cluster (Hachi shows account, user, association, qos)");
  EXPECT_EQ(ParseSacctmgrArgs({"show", "assoc", "frob=1"}).status().message(),
            "Unknown condition: frob=1\n Use keyword 'set' to modify value");
  EXPECT_EQ(ParseSacctmgrArgs({"show", "qos", "format=Bogus"}).status().message(),
            "Invalid field requested: \"Bogus\"");
}

TEST(Sstat, ARunningJobsUsageSoFarOneLineAJob) {
  state::JobRecord running;
  running.id = 5;
  running.state = state::JobState::kRunning;
  running.allocations.resize(1);
  running.allocations[0].node = "n1";
  running.usage.cpu_seconds = 125;
  running.usage.mem_peak_mib = 2048;
  running.usage.samples = 10;
  running.usage.gpu_util = 80;
  state::JobRecord ended = running;
  ended.id = 6;
  ended.state = state::JobState::kCompleted;
  Result<SstatOptions> o = ParseSstatArgs(
      {"-P", "-o", "JobID,AveCPU,MaxRSS,TRESUsageInAve,MaxDiskRead", "-j", "5.0,6", "7"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  const SstatOutput out = RenderSstat(*o, {running, ended});
  EXPECT_EQ(out.text,
            "JobID|AveCPU|MaxRSS|TRESUsageInAve|MaxDiskRead\n"
            "5|00:02:05|2G|cpu=00:02:05,gres/gpuutil=80|\n");
  EXPECT_EQ(out.errors, (std::vector<std::string>{"No steps running for job 6",
                                                  "couldn't get steps for job 7"}));
  // The default fields are Slurm's 47, JobID first; a field is sstat's by prefix.
  Result<SstatOptions> all = ParseSstatArgs({"-n", "5"});
  ASSERT_TRUE(all.ok());
  const std::string line = RenderSstat(*all, {running}).text;
  EXPECT_EQ(line.rfind("5            ", 0), 0u) << line;
  EXPECT_EQ(ParseSstatArgs({}).status().message(),
            "You didn't give me any jobs to stat.");
  EXPECT_EQ(ParseSstatArgs({"-o", "Bogus", "5"}).status().message(),
            "Invalid field requested: \"Bogus\"");
}

report::GpuReport GpuHours() {
  report::GpuReport r;
  r.by = report::ReportBy::kAccountUser;
  for (const auto& [name, hours] : std::vector<std::pair<std::string, double>>{
           {"nlp/dave", 30}, {"vision/alice", 16}, {"vision/bob", 4}, {"nlp/carol", 1}}) {
    report::ReportGroup g;
    g.name = name;
    g.gpu_hours = hours;
    r.groups.push_back(g);
  }
  return r;
}

std::string Sreport(const std::vector<std::string>& args) {
  setenv("TZ", "UTC", 1);
  tzset();
  constexpr Time kNow = 1'767'261'600;  // 2026-01-01T10:00:00Z
  Result<SreportOptions> o = ParseSreportArgs(args, kNow);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  if (!o.ok()) return "";
  Result<std::string> t = RenderSreport(*o, GpuHours(), [](const std::string& login) {
    return login == "dave" ? std::string("Dave Smith") : std::string();
  });
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : "";
}

TEST(Sreport, AccountUtilizationByUserInGpuMinutes) {
  const std::string dashes(80, '-');
  EXPECT_EQ(
      Sreport({"cluster", "AccountUtilizationByUser"}),
      dashes + "\n" +
          "Cluster/Account/User Utilization 2025-12-31T00:00:00 - "
          "2025-12-31T23:59:59 (86400 secs)\n"
          "Usage reported in TRES Minutes\n" +
          dashes + "\n" +
          "  Cluster         Account     Login     Proper Name      TRES Name     Used \n"
          "--------- --------------- --------- --------------- -------------- -------- \n"
          "                     root                                 gres/gpu     3060 \n"
          "                      nlp                                 gres/gpu     1860 \n"
          "                      nlp     carol                       gres/gpu       60 \n"
          "                      nlp      dave      Dave Smith       gres/gpu     1800 \n"
          "                   vision                                 gres/gpu     1200 \n"
          "                   vision     alice                       gres/gpu      960 \n"
          "                   vision       bob                       gres/gpu      240 "
          "\n");
  EXPECT_EQ(Sreport({"-nP", "-t", "hours", "cluster", "AccountUtilizationByUser",
                     "accounts=vision", "format=Account,Login,Used"}),
            "root||20\nvision||20\nvision|alice|16\nvision|bob|4\n");
}

TEST(Sreport, TopUsersAndWhatHachiCannotReport) {
  EXPECT_EQ(Sreport({"-nP", "-T", "gres/gpu", "user", "TopUsage", "TopCount=2",
                     "start=2025-12-01", "end=2026-01-01"}),
            "|dave|Dave Smith|nlp|gres/gpu|1800\n|alice||vision|gres/gpu|960\n");
  EXPECT_EQ(
      Sreport({"-p", "user", "top", "group", "format=Login,Account,Used"})
          .substr(Sreport({"-p", "user", "top", "group", "format=Login,Account,Used"})
                      .find("Login|")),
      "Login|Account|Used|\ndave|nlp|1800|\nalice|vision|960|\nbob|vision|240|\n"
      "carol|nlp|60|\n");
  EXPECT_EQ(ParseSreportArgs({"cluster", "Utilization"}, 0).status().code(),
            StatusCode::kUnsatisfiable);
  EXPECT_EQ(ParseSreportArgs({"-t", "percent", "user", "top"}, 0).status().code(),
            StatusCode::kUnsatisfiable);
  EXPECT_EQ(ParseSreportArgs({"-T", "cpu", "user", "top"}, 0).status().message(),
            "-T cpu: Hachi accounts GPU time: -T gres/gpu");
  EXPECT_EQ(ParseSreportArgs({"job", "sizes"}, 0).status().message(),
            "Not valid report job sizes (Hachi has cluster AccountUtilizationByUser and "
            "user TopUsage)");
}

TEST(PriorityReport, ReadsBackWhatItWrites) {
  const report::PriorityReport r = Report();
  Result<report::PriorityReport> back =
      report::PriorityReportFromJson(report::PriorityReportToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->now, r.now);
  EXPECT_EQ(back->half_life, r.half_life);
  ASSERT_EQ(back->accounts.size(), 2u);
  EXPECT_EQ(back->accounts[1].account, "physics");
  EXPECT_DOUBLE_EQ(back->accounts[1].factor, 0.25);
  EXPECT_EQ(back->users, r.users);
  ASSERT_EQ(back->jobs.size(), 2u);
  EXPECT_EQ(back->jobs[0].id, 12);
  EXPECT_DOUBLE_EQ(back->jobs[0].terms.age, 12.4);
  EXPECT_EQ(back->qos, r.qos);
  EXPECT_EQ(back->account_list, r.account_list);
  EXPECT_EQ(back->user_list, r.user_list);
  EXPECT_FALSE(report::PriorityReportFromJson("{\"multifactor\": true}").ok());
  EXPECT_EQ(report::PriorityReportFromJson("[]").status().message(),
            "priority: not a JSON object");
}

}  // namespace
}  // namespace hachi::cli::slurm
