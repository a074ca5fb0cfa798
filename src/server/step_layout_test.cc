// A step's layout on its job's nodes, row by row (steps_test.cc drives it through the
// Controller, with the launches the agents get).
#include "server/step_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hachi::server {
namespace {

// Job 9 on nodes n1..nK, each with `gpus` GPUs and `cpus` CPUs.
state::JobRecord Job(int nodes, int gpus = 8, int cpus = 16) {
  state::JobRecord j;
  j.id = 9;
  for (int i = 1; i <= nodes; ++i) {
    j.allocations.push_back(state::NodeAllocation{
        "n" + std::to_string(i), GpuSet::FirstN(gpus), cpus, 1024, 0, 0, {}});
  }
  return j;
}

struct Req {
  int nodes = 0;
  int ntasks = 0;
  int per_node = 0;
  int gpus_per_task = 0;
  int cpus_per_task = 0;
  std::vector<std::string> w = {};  // -w
  bool pty = false;
};

struct LayoutRow {
  std::string name;
  int job_nodes;
  Req req;
  // Want: the layout, or (error non-empty) the refusal's message.
  std::vector<std::string> nodes;
  std::vector<int> per_node;
  int cpus = 0;
  int gpus = 0;
  std::string error;
};

LayoutRow Fits(std::string name, int job_nodes, Req req, std::vector<std::string> nodes,
               std::vector<int> per_node, int cpus, int gpus) {
  return LayoutRow{std::move(name),     job_nodes, std::move(req), std::move(nodes),
                   std::move(per_node), cpus,      gpus,           ""};
}

LayoutRow Refused(std::string name, int job_nodes, Req req, std::string error) {
  return LayoutRow{std::move(name), job_nodes, std::move(req), {}, {}, 0, 0,
                   std::move(error)};
}

class StepLayoutTest : public testing::TestWithParam<LayoutRow> {};

TEST_P(StepLayoutTest, LaysOut) {
  const LayoutRow& row = GetParam();
  api::StepRequest r;
  r.argv = {"hostname"};
  r.nodes = row.req.nodes;
  r.ntasks = row.req.ntasks;
  r.ntasks_per_node = row.req.per_node;
  r.gpus_per_task = row.req.gpus_per_task;
  r.cpus_per_task = row.req.cpus_per_task;
  r.node_list = row.req.w;
  r.pty = row.req.pty;
  Result<StepLayout> got = LayOutStep(Job(row.job_nodes), r);
  if (!row.error.empty()) {
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status().message(), row.error);
    return;
  }
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->nodes, row.nodes);
  EXPECT_EQ(got->per_node, row.per_node);
  int ntasks = 0;
  for (int n : row.per_node) ntasks += n;
  EXPECT_EQ(got->ntasks, ntasks);
  EXPECT_EQ(got->cpus, row.cpus);
  EXPECT_EQ(got->gpus, row.gpus);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, StepLayoutTest,
    testing::Values(
        // Defaults: a task per node of the job, each seeing its node's GPUs and CPUs.
        Fits("defaults", 2, {}, {"n1", "n2"}, {1, 1}, 32, 16),
        Fits("n_block_first_nodes_one_more", 3, {.ntasks = 5}, {"n1", "n2", "n3"},
             {2, 2, 1}, 48, 24),
        Fits("fewer_tasks_than_nodes", 3, {.ntasks = 2}, {"n1", "n2"}, {1, 1}, 32, 16),
        Fits("N_limits_nodes", 3, {.nodes = 1, .ntasks = 3}, {"n1"}, {3}, 16, 8),
        Fits("per_node_without_n", 2, {.per_node = 3}, {"n1", "n2"}, {3, 3}, 32, 16),
        Fits("per_node_fewest_nodes", 3, {.ntasks = 5, .per_node = 4}, {"n1", "n2"},
             {4, 1}, 32, 16),
        Fits("w_picks_nodes_in_rank_order", 3, {.w = {"n3", "n2"}}, {"n2", "n3"}, {1, 1},
             32, 16),
        Fits("gpus_and_cpus_per_task", 2,
             {.ntasks = 4, .gpus_per_task = 2, .cpus_per_task = 3}, {"n1", "n2"}, {2, 2},
             12, 8),
        Fits("more_tasks_than_cpus_counts_tasks", 1, {.ntasks = 20}, {"n1"}, {20}, 20, 8),
        Fits("pty_one_task", 2, {.ntasks = 1, .pty = true}, {"n1"}, {1}, 16, 8),
        Refused("w_not_a_node", 2, {.w = {"n1", "x7"}}, "-w x7: not a node of job 9"),
        Refused("N_more_than_the_job", 2, {.nodes = 3},
                "the step asks for 3 nodes (-N); job 9 has 2"),
        Refused("N_more_than_w", 3, {.nodes = 2, .w = {"n1"}},
                "the step asks for 2 nodes (-N); job 9 has 1"),
        Refused("per_node_overflow", 2, {.nodes = 1, .ntasks = 5, .per_node = 4},
                "5 tasks do not fit on 1 node(s) at --ntasks-per-node=4"),
        Refused("pty_many_tasks", 2, {.pty = true},
                "--pty runs one task; the step asks for 2"),
        Refused("gpus_per_task_overflow", 1, {.ntasks = 3, .gpus_per_task = 3},
                "3 task(s) x --gpus-per-task=3 on n1: job 9 has 8 GPU(s) there"),
        Refused("cpus_per_task_overflow", 2, {.ntasks = 4, .cpus_per_task = 9},
                "2 task(s) x --cpus-per-task=9 on n1: job 9 has 16 CPU(s) there")),
    [](const testing::TestParamInfo<LayoutRow>& p) { return p.param.name; });

}  // namespace
}  // namespace hachi::server
