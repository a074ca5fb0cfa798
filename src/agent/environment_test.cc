#include "agent/environment.h"

#include <gtest/gtest.h>

#include <map>

#include "agent/testing.h"

namespace hachi::agent {
namespace {

std::map<std::string, std::string> AsMap(const EnvList& env) {
  return {env.begin(), env.end()};
}

struct EnvCase {
  std::string name;
  api::LaunchSpec spec;
  std::map<std::string, std::string> want;  // "" value with "-" prefix key: absent
  std::vector<std::string> absent;
};

class JobEnvironmentTest : public testing::TestWithParam<EnvCase> {};

TEST_P(JobEnvironmentTest, SetsVariables) {
  const EnvCase& c = GetParam();
  const auto env = AsMap(JobEnvironment(c.spec));
  for (const auto& [k, v] : c.want) {
    auto it = env.find(k);
    ASSERT_NE(it, env.end()) << k;
    EXPECT_EQ(it->second, v) << k;
  }
  for (const std::string& k : c.absent) EXPECT_EQ(env.count(k), 0u) << k;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, JobEnvironmentTest,
    testing::Values(
        EnvCase{"two_gpus_one_node",
                MakeLaunch(42).Gpus({3, 1}).Name("train").Partition("gpu8").Workdir(
                    "/home/a"),
                {{"CUDA_VISIBLE_DEVICES", "1,3"},
                 {"NVIDIA_VISIBLE_DEVICES", "1,3"},
                 {"HACHI_GPUS", "1,3"},
                 {"HACHI_JOB_ID", "42"},
                 {"SLURM_JOB_ID", "42"},
                 {"HACHI_JOB_NAME", "train"},
                 {"SLURM_JOB_NAME", "train"},
                 {"HACHI_NODENAME", "n1"},
                 {"HACHI_NODELIST", "n1"},
                 {"SLURM_NNODES", "1"},
                 {"SLURM_NODEID", "0"},
                 {"HACHI_PARTITION", "gpu8"},
                 {"HACHI_SUBMIT_DIR", "/home/a"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", "29500"},
                 {"WORLD_SIZE", "2"},
                 {"NPROC_PER_NODE", "2"},
                 {"PET_NPROC_PER_NODE", "2"},
                 {"PET_NNODES", "1"},
                 {"NODE_RANK", "0"},
                 {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}},
                {"HACHI_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_ID",
                 "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"}},
        EnvCase{"no_gpus",
                MakeLaunch(5),
                {{"CUDA_VISIBLE_DEVICES", ""},
                 {"NVIDIA_VISIBLE_DEVICES", "void"},
                 {"HACHI_GPUS", ""},
                 {"WORLD_SIZE", "1"},
                 {"NPROC_PER_NODE", "1"}},
                {}},
        EnvCase{"rank_1_of_2_with_addresses",
                MakeLaunch(9)
                    .Gpus({0, 1, 2, 3, 4, 5, 6, 7})
                    .Nodes({"a1", "a2"}, 1)
                    .Addresses({"10.0.0.1", "10.0.0.2"}),
                {{"MASTER_ADDR", "10.0.0.1"},
                 {"PET_MASTER_ADDR", "10.0.0.1"},
                 {"WORLD_SIZE", "16"},
                 {"NODE_RANK", "1"},
                 {"PET_NODE_RANK", "1"},
                 {"HACHI_NODE_RANK", "1"},
                 {"SLURM_NODEID", "1"},
                 {"HACHI_NODELIST", "a1,a2"},
                 {"SLURM_JOB_NODELIST", "a[1-2]"},  // Slurm's form
                 {"SLURM_NODELIST", "a[1-2]"},
                 {"SLURM_NNODES", "2"},
                 {"HACHI_NODENAME", "a2"},
                 {"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"}},
                {}},
        EnvCase{"two_nodes_without_addresses",
                MakeLaunch(9).Gpus({0}).Nodes({"a1", "a2"}, 0),
                {{"MASTER_ADDR", "a1"}, {"WORLD_SIZE", "2"}},
                {}},
        EnvCase{"array_task",
                MakeLaunch(107).Array(100, 7),
                {{"HACHI_ARRAY_JOB_ID", "100"},
                 {"HACHI_ARRAY_TASK_ID", "7"},
                 {"SLURM_ARRAY_JOB_ID", "100"},
                 {"SLURM_ARRAY_TASK_ID", "7"},
                 {"HACHI_JOB_ID", "107"}},
                {}},
        EnvCase{"gpu_share",
                MakeLaunch(3).Gpus({2}).Share(250, 20480),
                {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"},
                 {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=20480M"},
                 {"CUDA_VISIBLE_DEVICES", "2"}},
                {"CUDA_MPS_PIPE_DIRECTORY"}},
        // Served by the agent's MPS daemon for GPU 2 (agent/mps.h): the client finds
        // it through its pipe directory and names the GPU as the server shows it.
        EnvCase{"gpu_share_mps",
                MakeLaunch(3)
                    .Gpus({2})
                    .Share(250, 20480)
                    .Mps("/run/m/gpu2/pipe", "/run/m/gpu2/log", "GPU-2"),
                {{"CUDA_MPS_PIPE_DIRECTORY", "/run/m/gpu2/pipe"},
                 {"CUDA_MPS_LOG_DIRECTORY", "/run/m/gpu2/log"},
                 {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"},
                 {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=20480M"},
                 {"CUDA_VISIBLE_DEVICES", "GPU-2"},
                 {"NVIDIA_VISIBLE_DEVICES", "2"}},
                {}},
        EnvCase{"user_known",
                MakeLaunch(1).User("root", 0, 0),
                {{"USER", "root"},
                 {"LOGNAME", "root"},
                 {"HOME", "/root"},
                 {"SLURM_JOB_USER", "root"},
                 {"SLURM_JOB_UID", "0"}},
                {}},
        EnvCase{
            "submitter_env_kept_ours_override",
            MakeLaunch(8)
                .Gpus({0})
                .Env("FOO", "bar")
                .Env("CUDA_VISIBLE_DEVICES", "5")
                .Env("HACHI_ARRAY_TASK_ID", "3")
                .Env("SLURM_PROCID", "4")
                .Env("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "10"),
            {{"FOO", "bar"}, {"CUDA_VISIBLE_DEVICES", "0"}},
            {"HACHI_ARRAY_TASK_ID", "SLURM_PROCID", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"}},
        // ---- Tasks, CPUs, restarts, node lists as Slurm 22.05 sets them ----
        EnvCase{"no_tasks_asked",
                MakeLaunch(20).Cpus(32).Node("gpu01"),
                {{"SLURM_TASKS_PER_NODE", "32"},  // env_sbatch_gpu4.txt: CPUs on node
                 {"SLURM_CPUS_ON_NODE", "32"},
                 {"SLURM_JOB_CPUS_PER_NODE", "32"},
                 {"SLURM_JOB_NODELIST", "gpu01"},
                 {"SLURM_NODELIST", "gpu01"},
                 {"SLURM_JOB_NUM_NODES", "1"}},
                {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE",
                 "SLURM_CPUS_PER_TASK", "SLURM_RESTART_COUNT"}},
        EnvCase{"ntasks_cpus_per_task",
                MakeLaunch(21).Cpus(8).Tasks(4, 0, 2),
                {{"SLURM_NTASKS", "4"},
                 {"SLURM_NPROCS", "4"},
                 {"SLURM_TASKS_PER_NODE", "4"},
                 {"SLURM_CPUS_PER_TASK", "2"}},
                {"SLURM_NTASKS_PER_NODE"}},
        EnvCase{"ntasks_per_node_on_four_nodes",
                MakeLaunch(22).Cpus(4).Tasks(0, 2, 0).Nodes(
                    {"gpu01", "gpu02", "gpu03", "gpu04"}, 2),
                {{"SLURM_NTASKS", "8"},
                 {"SLURM_NPROCS", "8"},
                 {"SLURM_NTASKS_PER_NODE", "2"},
                 {"SLURM_TASKS_PER_NODE", "2(x4)"},
                 {"SLURM_JOB_CPUS_PER_NODE", "4(x4)"},
                 {"SLURM_JOB_NODELIST", "gpu[01-04]"},
                 {"SLURM_NODELIST", "gpu[01-04]"},
                 {"HACHI_NODELIST", "gpu01,gpu02,gpu03,gpu04"},
                 {"SLURM_JOB_NUM_NODES", "4"},
                 {"SLURM_NNODES", "4"}},
                {"SLURM_CPUS_PER_TASK"}},
        EnvCase{"ntasks_uneven_over_nodes",
                MakeLaunch(23).Cpus(2).Tasks(3, 0, 0).Nodes({"n1", "n2"}, 0),
                {{"SLURM_NTASKS", "3"}, {"SLURM_TASKS_PER_NODE", "2,1"}},
                {}},
        EnvCase{"ntasks_and_per_node_cap",
                MakeLaunch(24).Cpus(4).Tasks(5, 4, 0).Nodes({"n1", "n2"}, 0),
                {{"SLURM_NTASKS", "5"}, {"SLURM_TASKS_PER_NODE", "4,1"}},
                {}},
        EnvCase{"cpus_per_task_alone",
                MakeLaunch(25).Cpus(12).Tasks(0, 0, 4),
                {{"SLURM_CPUS_PER_TASK", "4"}, {"SLURM_TASKS_PER_NODE", "3"}},
                {"SLURM_NTASKS"}},
        EnvCase{"requeued_twice",
                MakeLaunch(26).Restarts(2),
                {{"SLURM_RESTART_COUNT", "2"}},
                {}},
        EnvCase{"inherited_restart_count_dropped",
                MakeLaunch(27).Env("SLURM_RESTART_COUNT", "5").Env("SLURM_NTASKS", "9"),
                {},
                {"SLURM_RESTART_COUNT", "SLURM_NTASKS"}}),
    [](const testing::TestParamInfo<EnvCase>& row) { return row.param.name; });

// MIG devices are named by UUID (CUDA and the container toolkit take them);
// HACHI_GPUS keeps their parent GPUs.
TEST(JobEnvironment, MigDevicesAreNamedByUuid) {
  api::LaunchSpec spec = MakeLaunch(7).Gpus({0, 1});
  spec.mig = {{"MIG-aaaa", 0, 1, 0}, {"MIG-bbbb", 1, 2, 0}};
  const auto env = AsMap(JobEnvironment(spec));
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "MIG-aaaa,MIG-bbbb");
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), "MIG-aaaa,MIG-bbbb");
  EXPECT_EQ(env.at("HACHI_GPUS"), "0,1");
}

TEST(JobEnvironment, OrderIsSubmitterThenOursAndDeterministic) {
  api::LaunchSpec spec =
      MakeLaunch(8).Gpus({0}).Env("B", "1").Env("A", "2").Env("B", "3").Env(
          "HACHI_JOB_ID", "99");
  const EnvList env = JobEnvironment(spec);
  ASSERT_GE(env.size(), 3u);
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"B", "3"}));
  EXPECT_EQ(env[1], (std::pair<std::string, std::string>{"A", "2"}));
  EXPECT_EQ(env[2].first, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(env, JobEnvironment(spec));
  int job_ids = 0;
  for (const auto& kv : env) job_ids += kv.first == "HACHI_JOB_ID";
  EXPECT_EQ(job_ids, 1);
}

struct PathCase {
  std::string name;
  std::string pattern;
  api::LaunchSpec spec;
  std::string want;
};

class ExpandOutputPathTest : public testing::TestWithParam<PathCase> {};

TEST_P(ExpandOutputPathTest, Expands) {
  EXPECT_EQ(api::ExpandOutputPath(GetParam().pattern, GetParam().spec), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ExpandOutputPathTest,
    testing::Values(
        PathCase{"default", "", MakeLaunch(12).Workdir("/w"), "/w/hachi-12.out"},
        PathCase{"workdir_trailing_slash", "o.txt", MakeLaunch(1).Workdir("/w/"),
                 "/w/o.txt"},
        PathCase{"absolute", "/logs/%j.log", MakeLaunch(12), "/logs/12.log"},
        PathCase{"name_user_node", "%x-%u-%N.out",
                 MakeLaunch(3).Name("t").User("alice", 1000, 1000).Node("g7"),
                 "/tmp/t-alice-g7.out"},
        PathCase{"array", "/l/%A_%a.out", MakeLaunch(107).Array(100, 7), "/l/100_7.out"},
        PathCase{"array_padded", "/l/%A_%4a.out", MakeLaunch(107).Array(100, 7),
                 "/l/100_0007.out"},
        PathCase{"plain_job_array_patterns", "/l/%A_%a.out", MakeLaunch(12),
                 "/l/12_0.out"},
        PathCase{"percent", "/l/100%%-%j", MakeLaunch(12), "/l/100%-12"},
        PathCase{"unknown_kept", "/l/%q%j%", MakeLaunch(12), "/l/%q12%"},
        PathCase{"name_defaults_to_command", "/l/%x",
                 MakeLaunch(1).Argv({"/usr/bin/python3", "x.py"}), "/l/python3"}),
    [](const testing::TestParamInfo<PathCase>& row) { return row.param.name; });

TEST(JobOutputFiles, EmptyStderrIsStdout) {
  api::OutputFiles f = api::JobOutputFiles(MakeLaunch(4).Workdir("/w").Out("o-%j"));
  EXPECT_EQ(f.out, "/w/o-4");
  EXPECT_EQ(f.err, "/w/o-4");
  f = api::JobOutputFiles(MakeLaunch(4).Workdir("/w").Err("e-%j"));
  EXPECT_EQ(f.out, "/w/hachi-4.out");
  EXPECT_EQ(f.err, "/w/e-4");
}

// The MPS limits of a GPU share (moved here from sched/: the agent sets them).
struct MpsRow {
  const char* name;
  int gpu;
  int milli;
  int64_t memory_mib;
  EnvList want;
};

class MpsEnvironmentTest : public ::testing::TestWithParam<MpsRow> {};

TEST_P(MpsEnvironmentTest, Limits) {
  api::LaunchSpec spec;
  spec.gpus = GpuSet::FromIndices({GetParam().gpu});
  spec.share_milli = GetParam().milli;
  spec.gpu_memory_mib = GetParam().memory_mib;
  EXPECT_EQ(MpsEnvironment(spec), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, MpsEnvironmentTest,
    ::testing::Values(
        MpsRow{"whole_gpu", 0, 0, 0, {}},
        MpsRow{"quarter", 2, 250, 0, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"}}},
        MpsRow{"rounds_up", 0, 1, 0, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "1"}}},
        MpsRow{"rounds_up_odd", 0, 333, 0, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "34"}}},
        MpsRow{"with_memory",
               3,
               500,
               20480,
               {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"},
                {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=20480M"}}}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
}  // namespace hachi::agent
