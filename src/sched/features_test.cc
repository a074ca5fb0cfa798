// Node features and node selection: the constraint grammar, the automatic
// features, gres.conf type names, and -C/-w/-x through submit, a cycle and the
// diagnosis.
#include "sched/features.h"

#include <gtest/gtest.h>

#include "sched/eligibility.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::MakeCluster;
using testing::MakeJob;

std::vector<std::string> F(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

struct MatchRow {
  const char* name;
  const char* constraint;
  std::vector<std::string> features;
  bool want;
};

class ConstraintMatchTest : public ::testing::TestWithParam<MatchRow> {};

TEST_P(ConstraintMatchTest, Matches) {
  Result<Constraint> c = Constraint::Parse(GetParam().constraint);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Matches(F(GetParam().features)), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ConstraintMatchTest,
    ::testing::Values(MatchRow{"empty", "", {}, true},
                      MatchRow{"name", "ib", {"ib", "h100"}, true},
                      MatchRow{"name_missing", "ib", {"h100"}, false},
                      MatchRow{"case_sensitive", "IB", {"ib"}, false},
                      MatchRow{"and", "ib&h100", {"ib", "h100"}, true},
                      MatchRow{"and_half", "ib&h100", {"h100"}, false},
                      MatchRow{"or", "a100|h100", {"h100"}, true},
                      MatchRow{"or_none", "a100|h100", {"v100"}, false},
                      MatchRow{"and_binds_tighter", "a|b&c", {"a"}, true},
                      MatchRow{"and_binds_tighter_2", "a|b&c", {"b"}, false},
                      MatchRow{"parens", "(a|b)&c", {"a"}, false},
                      MatchRow{"parens_2", "(a|b)&c", {"b", "c"}, true},
                      MatchRow{"bracket", "[rack1|rack2]", {"rack2"}, true},
                      MatchRow{"bracket_and", "ib&[rack1|rack2]", {"rack1"}, false},
                      MatchRow{
                          "bracket_and_2", "ib&[rack1|rack2]", {"ib", "rack1"}, true},
                      MatchRow{"dotted", "volta32gb.x", {"volta32gb.x"}, true}),
    [](const auto& row) { return std::string(row.param.name); });

struct BadRow {
  const char* name;
  const char* constraint;
  const char* message;  // part of the error
};

class ConstraintErrorTest : public ::testing::TestWithParam<BadRow> {};

TEST_P(ConstraintErrorTest, Refused) {
  Result<Constraint> c = Constraint::Parse(GetParam().constraint);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(GetParam().message), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find(GetParam().constraint), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ConstraintErrorTest,
    ::testing::Values(BadRow{"dangling_and", "a&", "a feature name is missing"},
                      BadRow{"leading_or", "|a", "a feature name is missing"},
                      BadRow{"unclosed", "(a|b", "')' is missing"},
                      BadRow{"unclosed_bracket", "[a|b", "']' is missing"},
                      BadRow{"count", "a*2", "counts (*N) are not supported"},
                      BadRow{"bracket_count", "[a|b]*2", "counts (*N)"},
                      BadRow{"two_brackets", "[a|b]&[c|d]", "only one [...] group"},
                      BadRow{"space", "a & b", "no spaces"},
                      BadRow{"stray", "a)b", "unexpected ')'"},
                      BadRow{"comma", "a,b", "unexpected ','"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(ConstraintTest, BracketChoiceLimitsToOneAlternative) {
  Result<Constraint> c = Constraint::Parse("ib&[rack1|rack2]");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->alternatives(), 2);
  EXPECT_TRUE(c->Matches(F({"ib", "rack2"}), 1));
  EXPECT_FALSE(c->Matches(F({"ib", "rack2"}), 0));
  EXPECT_EQ(c->Names(), (std::vector<std::string>{"ib", "rack1", "rack2"}));
}

TEST(FeaturesTest, GpuShortNames) {
  EXPECT_EQ(GpuShortName("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuShortName("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(GpuShortName("Tesla V100-SXM2-32GB"), "v100");
  EXPECT_EQ(GpuShortName("NVIDIA RTX A6000"), "a6000");
  EXPECT_EQ(GpuShortName("NVIDIA GeForce RTX 4090"), "rtx4090");
  EXPECT_EQ(GpuShortName("NVIDIA L40S"), "l40s");
  EXPECT_EQ(GpuShortName(""), "");
}

TEST(FeaturesTest, AutomaticAndConfigured) {
  ClusterState s = MakeCluster()
                       .Nodes(1, "hgx-h100")
                       .Nodes(1, "pcie-8x-4090-nv4-pairs")
                       .Nodes(1, "pcie-8x-l40s")
                       .Features(0, {"ib", "volta32gb"})
                       .GresType(0, "h100-80")
                       .Build();
  EXPECT_EQ(NodeFeatures(s.nodes[0]),
            F({"80gb", "h100", "h100-80", "ib", "nvidia_h100_80gb_hbm3", "nvswitch",
               "volta32gb"}));
  EXPECT_EQ(NodeFeatures(s.nodes[1]),
            F({"24gb", "nvidia_geforce_rtx_4090", "nvlink", "nvlink-pairs", "rtx4090"}));
  EXPECT_EQ(NodeFeatures(s.nodes[2]),
            F({"45gb", "l40s", "nvidia_l40s", "pcie", "pcie-only"}));
}

TEST(FeaturesTest, GresTypeMatchesExactlyBesideTheModel) {
  ClusterState s = MakeCluster().Nodes(1, "dgx-a100").GresType(0, "a100-80").Build();
  JobRequest r;
  r.gpu_model = "a100-80";  // --gres=gpu:a100-80:1
  EXPECT_TRUE(NodeMatchesStatic(s.nodes[0], r));
  r.gpu_model = "A100-80";  // case-sensitive, as Slurm
  EXPECT_FALSE(NodeMatchesStatic(s.nodes[0], r));
  r.gpu_model = "a100";  // the discovered model still works
  EXPECT_TRUE(NodeMatchesStatic(s.nodes[0], r));
  r.gpu_model = "v100|a100-80";
  EXPECT_TRUE(NodeMatchesStatic(s.nodes[0], r));
}

// n0, n1 hgx-h100 with "ib"; n2, n3 pcie-8x-l40s; partition p over all.
ClusterBuilder Four() {
  return MakeCluster()
      .Nodes(2, "hgx-h100")
      .Nodes(2, "pcie-8x-l40s")
      .Features(0, {"ib", "rack1"})
      .Features(1, {"ib", "rack2"})
      .Features(2, {"rack1"})
      .Features(3, {"rack2"})
      .Partition("p");
}

Plan RunCycle(const ClusterState& s, Time now = 1000) {
  SchedConfig c;
  c.policy = "hachi";
  auto sched = Scheduler::Create(c);
  EXPECT_TRUE(sched.ok());
  return (*sched)->Schedule(s, now);
}

struct PlaceRow {
  const char* name;
  testing::JobBuilder job;
  std::vector<int> want_nodes;  // of the start, ascending
};

class SelectionPlaceTest : public ::testing::TestWithParam<PlaceRow> {};

TEST_P(SelectionPlaceTest, Places) {
  const ClusterState s = Four().Pending(GetParam().job).Build();
  ASSERT_TRUE(ValidateRequest(s, s.pending[0].req).ok())
      << ValidateRequest(s, s.pending[0].req).status().ToString();
  const Plan plan = RunCycle(s);
  ASSERT_EQ(plan.starts.size(), 1u);
  std::vector<int> got;
  for (const Allocation& a : plan.starts[0].allocations) got.push_back(a.node);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, GetParam().want_nodes);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, SelectionPlaceTest,
    ::testing::Values(
        PlaceRow{"constraint", MakeJob(1).Gpus(1).Constraint("l40s&rack2"), {3}},
        PlaceRow{"constraint_auto", MakeJob(1).Gpus(1).Constraint("pcie"), {2}},
        PlaceRow{"nodelist_one", MakeJob(1).Gpus(1).Nodelist("n3"), {3}},
        PlaceRow{"exclude", MakeJob(1).Gpus(8).Exclude("n[0-2]"), {3}},
        PlaceRow{
            "nodelist_all_of_gang", MakeJob(1).Gang(2, 8).Nodelist("n[2-3]"), {2, 3}},
        PlaceRow{"nodelist_part_of_gang",
                 MakeJob(1).Gang(2, 4).Model("l40s").Nodelist("n3"),
                 {2, 3}},
        PlaceRow{"matching_or_single",
                 MakeJob(1).Gpus(8).Constraint("l40s&[rack1|rack2]"),
                 {2}},
        PlaceRow{"gang_excludes", MakeJob(1).Gang(2, 8).Exclude("n0"), {2, 3}}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(SelectionTest, MatchingOrGangSharesOneAlternative) {
  // rack1: n0 (h100), n2 (l40s); rack2: n1 (h100), n3 (l40s). A 2-node gang under
  // "[rack1|rack2]" takes both nodes from one rack, which mixes models (a gang never
  // does): it waits, although "rack1|rack2" places it on n0, n1.
  const ClusterState s =
      Four().Pending(MakeJob(1).Gang(2, 1).Constraint("[rack1|rack2]")).Build();
  const Plan plan = RunCycle(s);
  EXPECT_TRUE(plan.starts.empty());
  const ClusterState plain =
      Four().Pending(MakeJob(1).Gang(2, 1).Constraint("rack1|rack2")).Build();
  EXPECT_EQ(RunCycle(plain).starts.size(), 1u);
}

struct RefuseRow {
  const char* name;
  testing::JobBuilder job;
  StatusCode code;
  const char* message;
};

class SelectionRefuseTest : public ::testing::TestWithParam<RefuseRow> {};

TEST_P(SelectionRefuseTest, RefusedAtSubmit) {
  const ClusterState s = Four().Build();
  Result<Job> v = ValidateRequest(s, GetParam().job.job().req);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), GetParam().code) << v.status().ToString();
  EXPECT_NE(v.status().message().find(GetParam().message), std::string::npos)
      << v.status().message();
}

constexpr StatusCode kU = StatusCode::kUnsatisfiable;
constexpr StatusCode kI = StatusCode::kInvalidArgument;

INSTANTIATE_TEST_SUITE_P(
    Rows, SelectionRefuseTest,
    ::testing::Values(
        RefuseRow{"no_match", MakeJob(1).Gpus(1).Constraint("ib&l40s"), kU,
                  "Requested node configuration is not available: constraint 'ib&l40s' "
                  "matches no node of partition p"},
        RefuseRow{"bad_grammar", MakeJob(1).Gpus(1).Constraint("ib&"), kI,
                  "invalid constraint"},
        RefuseRow{"unknown_node", MakeJob(1).Gpus(1).Nodelist("gpu07"), kI,
                  "Invalid node name specified"},
        RefuseRow{"list_longer_than_job", MakeJob(1).Gpus(1).Nodelist("n[0-1]"), kI,
                  "--nodelist names 2 nodes; the job asks for 1"},
        RefuseRow{"required_and_excluded",
                  MakeJob(1).Gpus(1).Nodelist("n1").Exclude("n1"), kU,
                  "both required (--nodelist) and excluded"},
        RefuseRow{"required_lacks_feature",
                  MakeJob(1).Gpus(1).Nodelist("n2").Constraint("ib"), kU,
                  "Requested node configuration is not available: node n2"},
        RefuseRow{"all_excluded", MakeJob(1).Gpus(1).Exclude("n[0-3]"), kU,
                  "Requested node configuration is not available"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(SelectionTest, DiagnosisSaysWhy) {
  // The only matching node is busy: Resources, with the selection named.
  ClusterState s = Four()
                       .Running(MakeJob(9).Gpus(8).Start(0).Limit(kHour), 3)
                       .Pending(MakeJob(1).Gpus(8).Constraint("l40s&rack2"))
                       .Build();
  Plan plan = RunCycle(s);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kResources);
  const std::string text = plan.pending[0].Format(s, 1000);
  EXPECT_NE(text.find("constraint 'l40s&rack2' matches 1 of 4 nodes of partition p"),
            std::string::npos)
      << text;

  // Excluded nodes are counted.
  s = Four()
          .Running(MakeJob(9).Gpus(8).Start(0).Limit(kHour), 3)
          .Pending(MakeJob(1).Gpus(8).Exclude("n[0-2]"))
          .Build();
  plan = RunCycle(s);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_NE(plan.pending[0].Format(s, 1000).find("excluded 3 nodes"), std::string::npos)
      << plan.pending[0].Format(s, 1000);

  // Its node drained: ReqNodeNotAvail.
  s = Four()
          .NodeState(3, NodeState::kDrained)
          .Pending(MakeJob(1).Gpus(1).Nodelist("n3"))
          .Build();
  plan = RunCycle(s);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kReqNodeNotAvail);
  EXPECT_EQ(ReasonName(plan.pending[0].reason), "ReqNodeNotAvail");

  // A constraint no node has (a job that got past submit: the config changed):
  // BadConstraints, never reserved.
  s = Four().Pending(MakeJob(1).Gpus(1).Constraint("nvme")).Build();
  plan = RunCycle(s);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kBadConstraints);
  EXPECT_TRUE(plan.reservations.empty());
  EXPECT_NE(plan.pending[0].Format(s, 1000).find(
                "constraint 'nvme' matches no node of partition p; it can never run"),
            std::string::npos)
      << plan.pending[0].Format(s, 1000);
}

}  // namespace
}  // namespace hachi::sched
