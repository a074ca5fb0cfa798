#include "sched/dependencies.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string_view>

#include "sched/cluster.h"
#include "sched/plan.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using K = DependencyKind;
using O = JobOutcome;

struct Row {
  const char* name;
  std::vector<Dependency> deps;
  std::map<JobId, O> outcomes;
  DependencyState want;
  JobId want_job;
};

class DependencyRows : public ::testing::TestWithParam<Row> {};

TEST_P(DependencyRows, Evaluates) {
  const Row& r = GetParam();
  DependencyVerdict v = EvaluateDependencies(r.deps, [&](JobId id) {
    auto it = r.outcomes.find(id);
    return it == r.outcomes.end() ? O::kUnknown : it->second;
  });
  EXPECT_EQ(v.state, r.want);
  EXPECT_EQ(v.job, r.want_job);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, DependencyRows,
    ::testing::Values(
        Row{"none", {}, {}, DependencyState::kNone, 0},
        Row{"afterok_running",
            {{K::kAfterOk, 7}},
            {{7, O::kNotFinished}},
            DependencyState::kWaiting,
            7},
        Row{"afterok_succeeded",
            {{K::kAfterOk, 7}},
            {{7, O::kSucceeded}},
            DependencyState::kNone,
            0},
        Row{"afterok_failed",
            {{K::kAfterOk, 7}},
            {{7, O::kFailed}},
            DependencyState::kNeverMet,
            7},
        Row{"afterany_failed",
            {{K::kAfterAny, 7}},
            {{7, O::kFailed}},
            DependencyState::kNone,
            0},
        Row{"afterany_running",
            {{K::kAfterAny, 7}},
            {{7, O::kNotFinished}},
            DependencyState::kWaiting,
            7},
        Row{"unknown_job", {{K::kAfterAny, 99}}, {}, DependencyState::kNeverMet, 99},
        Row{"first_waiting_named",
            {{K::kAfterOk, 1}, {K::kAfterOk, 2}, {K::kAfterOk, 3}},
            {{1, O::kSucceeded}, {2, O::kNotFinished}, {3, O::kNotFinished}},
            DependencyState::kWaiting,
            2},
        Row{"never_met_wins_over_waiting",
            {{K::kAfterOk, 1}, {K::kAfterOk, 2}},
            {{1, O::kNotFinished}, {2, O::kFailed}},
            DependencyState::kNeverMet,
            2}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(CheckDependenciesTest, RefusesSelfDuplicatesAndBadIds) {
  EXPECT_TRUE(CheckDependencies(5, {{K::kAfterOk, 1}, {K::kAfterAny, 2}}).ok());
  Status self = CheckDependencies(5, {{K::kAfterOk, 5}});
  EXPECT_NE(self.message().find("depends on itself"), std::string::npos);
  EXPECT_FALSE(CheckDependencies(5, {{K::kAfterOk, 1}, {K::kAfterAny, 1}}).ok());
  EXPECT_FALSE(CheckDependencies(5, {{K::kAfterOk, 0}}).ok());
}

TEST(DependencyDiagnosisTest, NamesTheJobWaitedOn) {
  ClusterState state =
      testing::MakeCluster()
          .Nodes(1, "hgx-h100")
          .Partition("p")
          .Pending(testing::MakeJob(3).Gpus(1).Deps(DependencyState::kWaiting))
          .Build();
  state.pending[0].deps_job = 812;
  auto sched = Scheduler::Create(SchedConfig{});
  ASSERT_TRUE(sched.ok());
  Plan plan = (*sched)->Schedule(state, 0);
  ASSERT_TRUE(plan.starts.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kDependency);
  EXPECT_EQ(plan.pending[0].Format(state, 0), "waiting for job 812 to end");
}

// The one table of names: each kind reads back from its name, stored rows and the API
// depend on these exact words, and nothing else parses.
TEST(DependencyKindNamesTest, Table) {
  struct Case {
    const char* name;
    std::string_view word;
    std::optional<K> want;
  };
  const Case cases[] = {
      {"afterok", "afterok", K::kAfterOk},
      {"afterany", "afterany", K::kAfterAny},
      {"afternotok", "afternotok", K::kAfterNotOk},
      {"singleton", "singleton", K::kSingleton},
      {"upper case is the caller's to fold", "AFTEROK", std::nullopt},
      {"Slurm's after is not run here", "after", std::nullopt},
      {"empty", "", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ParseDependencyKind(c.word), c.want) << c.name;
    if (c.want) {
      EXPECT_EQ(DependencyKindName(*c.want), c.word) << c.name;
    }
  }
  EXPECT_EQ(DependencyKindNames(), "afterok, afterany, afternotok, singleton");
  EXPECT_EQ(DependencyKindNames(" or "), "afterok, afterany, afternotok or singleton");
}

}  // namespace
}  // namespace hachi::sched
