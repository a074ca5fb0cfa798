#include "cli/directives.h"

#include <gtest/gtest.h>

#include <functional>

namespace hachi::cli {
namespace {

using Args = std::vector<std::string>;

Result<SubmitOptions> Parse(const Args& flags, std::string_view script = "") {
  Result<ParsedOptions> d = ParseDirectives(script, "job.sh");
  if (!d.ok()) return d.status();
  Result<ParsedOptions> f = ParseFlags(flags);
  if (!f.ok()) return f.status();
  return BuildSubmitOptions(*d, *f);
}

struct OkCase {
  std::string name;
  Args flags;
  std::string script;
  std::function<void(const SubmitOptions&)> check;
};

TEST(Directives, Options) {
  const std::vector<OkCase> cases = {
      {"gres_count",
       {"--gres=gpu:4"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 4);
         EXPECT_EQ(o.req.nodes, 1);
         EXPECT_EQ(o.req.gpus_per_node, 0);
       }},
      {"gres_model",
       {"--gres", "gpu:h100:2"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 2);
         EXPECT_EQ(o.req.gpu_model, "h100");
       }},
      // A MIG profile as the type asks for MIG devices, from a flag or an
      // #SBATCH line alike.
      {"gres_mig_profile",
       {"--gres=gpu:1g.10gb:2"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 2);
         EXPECT_EQ(o.req.mig_profile, "1g.10gb");
         EXPECT_EQ(o.req.gpu_model, "");
       }},
      {"gres_mig_compute_profile_in_script",
       {},
       "#!/bin/sh\n#SBATCH --gres=gpu:1c.3g.40gb:1\n",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 1);
         EXPECT_EQ(o.req.mig_profile, "1c.3g.40gb");
       }},
      {"gpus_mig_profile",
       {"--gpus=3g.40gb:1"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.mig_profile, "3g.40gb"); }},
      {"gres_bare_gpu_is_one",
       {"--gres=gpu"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.gpus, 1); }},
      {"gres_per_node_times_nodes",
       {"--gres=gpu:8", "--nodes=4"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.nodes, 4);
         EXPECT_EQ(o.req.gpus_per_node, 8);
         EXPECT_EQ(o.req.gpus, 32);
         EXPECT_EQ(o.req.TotalGpus(), 32);
       }},
      {"nodes_before_gres",
       {"-N", "2", "--gres=gpu:4"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.TotalGpus(), 8); }},
      {"gpus_total_over_nodes",
       {"-G", "16", "-N2"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 16);
         EXPECT_EQ(o.req.gpus_per_node, 8);
       }},
      {"gpus_long_model",
       {"--gpus=a100:3"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 3);
         EXPECT_EQ(o.req.gpu_model, "a100");
       }},
      // A type without a count is one GPU of that type, as Slurm reads it.
      {"gpus_model_alone",
       {"--gpus=a100"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 1);
         EXPECT_EQ(o.req.gpu_model, "a100");
       }},
      {"gres_model_alone_in_script",
       {},
       "#!/bin/sh\n#SBATCH --gres=gpu:h100\n",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 1);
         EXPECT_EQ(o.req.gpu_model, "h100");
       }},
      {"gres_mig_profile_alone",
       {"--gres=gpu:1g.10gb"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 1);
         EXPECT_EQ(o.req.mig_profile, "1g.10gb");
       }},
      {"gpus_per_node_model_alone",
       {"--gpus-per-node=h100", "-N", "2"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus_per_node, 1);
         EXPECT_EQ(o.req.gpus, 2);
         EXPECT_EQ(o.req.gpu_model, "h100");
       }},
      {"gpus_per_node",
       {"--gpus-per-node=4", "--nodes", "3"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus_per_node, 4);
         EXPECT_EQ(o.req.gpus, 12);
       }},
      {"partition_short_attached",
       {"-pgpu8"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.partition, "gpu8"); }},
      {"partition_long",
       {"--partition", "gpu-shared"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.partition, "gpu-shared"); }},
      {"cpus_per_task",
       {"-c", "16"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.cpus, 16); }},
      {"cpus_per_gpu",
       {"--cpus-per-gpu=8"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.cpus_per_gpu, 8); }},
      {"mem_default_mb",
       {"--mem=4096"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 4096); }},
      {"mem_g",
       {"--mem=64G"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 65536); }},
      {"mem_t",
       {"--mem=1T"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 1048576); }},
      {"mem_k_rounds_up",
       {"--mem=1500K"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 2); }},
      {"mem_lower_suffix",
       {"--mem=2g"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 2048); }},
      {"mem_zero_is_all_of_each_nodes",
       {"--mem=0"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.memory_mib, sched::kAllOfNodeMemory);
         EXPECT_TRUE(o.warnings.empty());
       }},
      {"mem_per_gpu",
       {"--mem-per-gpu=80G"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.memory_mib_per_gpu, 81920);
         EXPECT_EQ(o.req.memory_mib, 0);
       }},
      {"mem_per_gpu_flag_overrides_mem_directive",
       {"--mem-per-gpu=10G"},
       "#!/bin/sh\n#SBATCH --mem=100G\n",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.memory_mib, 0);
         EXPECT_EQ(o.req.memory_mib_per_gpu, 10240);
       }},
      {"job_name",
       {"-J", "train"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.spec.name, "train"); }},
      {"output_error",
       {"-o", "out-%j.log", "--error=err-%j.log"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.stdout_path, "out-%j.log");
         EXPECT_EQ(o.spec.stderr_path, "err-%j.log");
       }},
      {"dependency",
       {"-d", "afterok:1:2,afterany:3"},
       "",
       [](const SubmitOptions& o) {
         ASSERT_EQ(o.req.dependencies.size(), 3u);
         EXPECT_EQ(o.req.dependencies[0].job, 1);
         EXPECT_EQ(o.req.dependencies[0].kind, sched::DependencyKind::kAfterOk);
         EXPECT_EQ(o.req.dependencies[1].job, 2);
         EXPECT_EQ(o.req.dependencies[2].job, 3);
         EXPECT_EQ(o.req.dependencies[2].kind, sched::DependencyKind::kAfterAny);
       }},
      {"exclusive",
       {"--exclusive"},
       "",
       [](const SubmitOptions& o) { EXPECT_TRUE(o.req.exclusive); }},
      {"array",
       {"-a", "1-100%10"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.array.max_running, 10);
         EXPECT_EQ(ExpandArray(o.array).size(), 100u);
       }},
      {"qos_account",
       {"-q", "high", "-A", "vision"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.qos, "high");
         EXPECT_EQ(o.req.account, "vision");
       }},
      {"hold_short", {"-H"}, "", [](const SubmitOptions& o) { EXPECT_TRUE(o.hold); }},
      {"hold_long", {"--hold"}, "", [](const SubmitOptions& o) { EXPECT_TRUE(o.hold); }},
      {"requeue",
       {"--requeue"},
       "",
       [](const SubmitOptions& o) { EXPECT_TRUE(o.spec.requeue); }},
      {"no_requeue_overrides_directive",
       {"--no-requeue"},
       "#SBATCH --requeue\n",
       [](const SubmitOptions& o) { EXPECT_FALSE(o.spec.requeue); }},
      {"comment_with_spaces",
       {"--comment", "a b c"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.spec.comment, "a b c"); }},
      {"chdir",
       {"-D", "/data/run"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.spec.workdir, "/data/run"); }},
      {"gpu_share",
       {"--gpu-share=0.25"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpu_share_milli, 250);
         EXPECT_EQ(o.req.gpus, 1);
       }},
      {"gpu_share_three_decimals",
       {"--gpu-share", ".125"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.gpu_share_milli, 125); }},
      {"gpu_share_with_mem",
       {"--gpu-share=0.5", "--gpu-mem=20G"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpu_share_milli, 500);
         EXPECT_EQ(o.req.gpu_memory_mib, 20480);
         EXPECT_EQ(o.req.min_gpu_memory_mib, 0);
       }},
      {"gpu_mem_whole_gpus_is_a_minimum",
       {"--gres=gpu:2", "--gpu-mem=40G"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpu_memory_mib, 0);
         EXPECT_EQ(o.req.min_gpu_memory_mib, 40960);
       }},
      {"container",
       {"--container-image=nvcr.io/nvidia/pytorch:24.01-py3", "--shm-size=8G"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.container_image, "nvcr.io/nvidia/pytorch:24.01-py3");
         EXPECT_EQ(o.spec.shm_mib, 8192);
       }},
      {"wrap_and_parsable",
       {"--parsable", "--wrap", "nvidia-smi -L"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.wrap, "nvidia-smi -L");
         EXPECT_TRUE(o.parsable);
       }},
      {"ignored_options_warn",
       {"--mail-type=END", "-n", "4", "--export=ALL"},
       "",
       [](const SubmitOptions& o) {
         // -n and --export are honoured: no warning for them.
         ASSERT_EQ(o.warnings.size(), 1u);
         EXPECT_EQ(o.warnings[0], "--mail-type 'END': ignored (Hachi sends no mail)");
       }},
      // ---- The job runtime's options ----
      {"ntasks_cpus_per_task",
       {"-n", "4", "-c", "2"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.ntasks, 4);
         EXPECT_EQ(o.spec.cpus_per_task, 2);
         EXPECT_EQ(o.spec.ntasks_per_node, 0);
         EXPECT_EQ(o.req.cpus, 8);  // 4 tasks x 2 CPUs, one node
       }},
      {"ntasks_alone_one_cpu_each",
       {"--ntasks=3"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.ntasks, 3);
         EXPECT_EQ(o.spec.cpus_per_task, 0);
         EXPECT_EQ(o.req.cpus, 3);
       }},
      {"ntasks_over_nodes_rounds_up",
       {"-n", "3", "-N", "2", "-c", "4"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.cpus, 8); }},  // 2 tasks x 4
      {"ntasks_per_node",
       {"--ntasks-per-node=2", "-N2", "--cpus-per-task=3"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.ntasks_per_node, 2);
         EXPECT_EQ(o.spec.ntasks, 0);
         EXPECT_EQ(o.req.cpus, 6);  // per node
       }},
      // --mem-per-cpu, --gpus-per-task and --tasks-per-node as Slurm
      // reads them (testdata/slurm-scripts/slurm-22.05/ has Slurm's own reading).
      {"mem_per_cpu_times_the_nodes_cpus",
       {"--mem-per-cpu=6G", "-c", "4", "--gres=gpu:1"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.memory_mib, 4 * 6144);
         EXPECT_EQ(o.req.memory_mib_per_gpu, 0);
       }},
      {"mem_per_cpu_one_cpu_when_none_asked",
       {"--mem-per-cpu=512M"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 512); }},
      {"mem_per_cpu_with_cpus_per_gpu",
       {"--mem-per-cpu=1G", "--cpus-per-gpu=8", "--gres=gpu:2"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 16 * 1024); }},
      {"mem_after_mem_per_cpu_wins",
       {"--mem-per-cpu=1G", "--mem=3G"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 3072); }},
      {"gpus_per_task_times_tasks_per_node",
       {"-N", "2", "--ntasks-per-node=1", "--gpus-per-task=4"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.GpusPerNode(), 4);
         EXPECT_EQ(o.req.TotalGpus(), 8);
       }},
      {"gpus_per_task_over_ntasks",
       {"-n", "8", "--gpus-per-task=1"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.gpus, 8); }},
      {"tasks_per_node_is_ntasks_per_node",
       {"--tasks-per-node=2", "-c", "3"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.ntasks_per_node, 2);
         EXPECT_EQ(o.req.cpus, 6);
       }},
      {"cpus_per_task_alone_unchanged",
       {"-c", "6"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.cpus, 6);
         EXPECT_EQ(o.spec.cpus_per_task, 6);
       }},
      {"cpus_per_gpu_wins_over_tasks",
       {"-n", "4", "--cpus-per-gpu=8", "--gres=gpu:2"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.cpus, 0);
         EXPECT_EQ(o.req.cpus_per_gpu, 8);
       }},
      {"mincpus_raises",
       {"-n", "2", "--mincpus=16"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.cpus, 16); }},
      {"mincpus_below_is_no_change",
       {"-n", "8", "--mincpus", "4"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.cpus, 8); }},
      {"mincpus_with_cpus_per_gpu",
       {"--gres=gpu:2", "--cpus-per-gpu=4", "--mincpus=10"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.cpus, 2); }},  // 2 + 2 x 4 = 10
      {"overcommit_warns",
       {"-O", "-n", "4"},
       "",
       [](const SubmitOptions& o) {
         ASSERT_EQ(o.warnings.size(), 1u);
         EXPECT_EQ(o.warnings[0],
                   "-O: Hachi does not over-subscribe CPUs; the job gets a CPU for "
                   "each task");
         EXPECT_EQ(o.req.cpus, 4);
       }},
      {"overcommit_directive",
       {},
       "#SBATCH --overcommit\n",
       [](const SubmitOptions& o) {
         ASSERT_EQ(o.warnings.size(), 1u);
         EXPECT_EQ(o.warnings[0].rfind("job.sh:1: #SBATCH --overcommit: ", 0), 0u);
       }},
      {"signal_batch_time",
       {"--signal=B:USR1@5"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.signal, 10);
         EXPECT_EQ(o.spec.signal_before, 5);
         EXPECT_TRUE(o.spec.signal_batch_only);
       }},
      {"signal_default_time",
       {},
       "#SBATCH --signal=USR2\n",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.signal, 12);
         EXPECT_EQ(o.spec.signal_before, 60);
         EXPECT_FALSE(o.spec.signal_batch_only);
       }},
      {"signal_number_submitit",
       {"--signal=USR2@90"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.signal, 12);
         EXPECT_EQ(o.spec.signal_before, 90);
       }},
      {"signal_r_flag_and_number",
       {"--signal=R:15@30"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.signal, 15);
         EXPECT_EQ(o.spec.signal_before, 30);
         EXPECT_FALSE(o.spec.signal_batch_only);
       }},
      {"signal_rb",
       {"--signal=rb:SIGTERM@0"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.spec.signal, 15);
         EXPECT_EQ(o.spec.signal_before, 0);
         EXPECT_TRUE(o.spec.signal_batch_only);
       }},
      {"open_mode",
       {"--open-mode=append"},
       "",
       [](const SubmitOptions& o) { EXPECT_TRUE(o.spec.open_append); }},
      {"open_mode_truncate_first_letter",
       {"--open-mode=append", "--open-mode=T"},
       "",
       [](const SubmitOptions& o) { EXPECT_FALSE(o.spec.open_append); }},
      {"export_default_all",
       {},
       "",
       [](const SubmitOptions& o) {
         EXPECT_TRUE(o.export_env.all);
         EXPECT_FALSE(o.export_env.none);
       }},
      {"export_none",
       {"--export=NONE"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_FALSE(o.export_env.all);
         EXPECT_TRUE(o.export_env.none);
       }},
      {"export_all_plus",
       {"--export=ALL,X=1"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_TRUE(o.export_env.all);
         ASSERT_EQ(o.export_env.vars.size(), 1u);
         EXPECT_EQ(o.export_env.vars[0].name, "X");
         EXPECT_EQ(o.export_env.vars[0].value, "1");
       }},
      {"export_list",
       {"--export=A,B=2"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_FALSE(o.export_env.all);
         ASSERT_EQ(o.export_env.vars.size(), 2u);
         EXPECT_EQ(o.export_env.vars[0].value, std::nullopt);
         EXPECT_EQ(o.export_env.vars[1].value, "2");
       }},
      {"mem_optional_b_any_case",
       {"--mem=4GB"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 4096); }},
      {"mem_lower_gb",
       {"--mem=4gb"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 4096); }},
      {"mem_mb",
       {"--mem=4096MB"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib, 4096); }},
      {"mem_per_gpu_gb",
       {"--mem-per-gpu=10GB", "--gres=gpu:1"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.req.memory_mib_per_gpu, 10240); }},
      {"shm_size_tb",
       {"--shm-size=1Tb"},
       "",
       [](const SubmitOptions& o) { EXPECT_EQ(o.spec.shm_mib, 1048576); }},
      {"requeue_flags",
       {"--requeue"},
       "#SBATCH --no-requeue\n",
       [](const SubmitOptions& o) { EXPECT_TRUE(o.spec.requeue); }},
      {"no_requeue_flag",
       {"--no-requeue"},
       "#SBATCH --requeue\n",
       [](const SubmitOptions& o) { EXPECT_FALSE(o.spec.requeue); }},
      {"explicitly_set",
       {"-t", "10", "-J", "x"},
       "",
       [](const SubmitOptions& o) {
         EXPECT_TRUE(o.IsSet("time"));
         EXPECT_TRUE(o.IsSet("job-name"));
         EXPECT_FALSE(o.IsSet("partition"));
       }},
      {"defaults",
       {},
       "",
       [](const SubmitOptions& o) {
         EXPECT_EQ(o.req.gpus, 0);
         EXPECT_EQ(o.req.nodes, 1);
         EXPECT_EQ(o.req.time_limit, 0);
         EXPECT_FALSE(o.hold);
         EXPECT_TRUE(o.array.empty());
         EXPECT_TRUE(o.explicitly_set.empty());
       }},
  };
  for (const OkCase& c : cases) {
    SCOPED_TRACE(c.name);
    Result<SubmitOptions> r = Parse(c.flags, c.script);
    ASSERT_TRUE(r.ok()) << r.status().message();
    c.check(*r);
  }
}

TEST(Directives, TimeFormats) {
  struct Case {
    std::string name, text;
    Duration want;
    bool unlimited;
  };
  const std::vector<Case> cases = {
      {"minutes", "90", 90 * kMinute, false},
      {"mm_ss", "10:30", 10 * kMinute + 30, false},
      {"hh_mm_ss", "2:00:05", 2 * kHour + 5, false},
      {"d_hh", "1-12", kDay + 12 * kHour, false},
      {"d_hh_mm", "2-03:04", 2 * kDay + 3 * kHour + 4 * kMinute, false},
      {"d_hh_mm_ss", "0-00:00:30", 30, false},
      {"unlimited", "UNLIMITED", 0, true},
      {"infinite", "infinite", 0, true},
      {"zero", "0", 0, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<SubmitOptions> r = Parse({"--time", c.text});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->req.time_limit, c.want);
    EXPECT_EQ(r->time_unlimited, c.unlimited);
  }
}

TEST(Directives, Errors) {
  struct Case {
    std::string name;
    Args flags;
    std::string script;
    std::string want;
  };
  const std::string kTime = "not a time (use MM, HH:MM:SS or D-HH:MM:SS)";
  const std::vector<Case> cases = {
      {"gres_directive_count",
       {},
       "#!/bin/bash\n\n# setup\n#SBATCH --gres=gpu:h100:x\n",
       "job.sh:4: #SBATCH --gres=gpu:h100:x: 'x' is not a GPU count"},
      {"time_flag", {"--time", "9x"}, "", "--time '9x': " + kTime},
      {"time_flag_short", {"-t9x"}, "", "-t '9x': " + kTime},
      {"time_seconds_over_59", {"-t", "1:60"}, "", "-t '1:60': " + kTime},
      {"time_too_many_parts", {"-t", "1:2:3:4"}, "", "-t '1:2:3:4': " + kTime},
      {"time_directive", {}, "#SBATCH -t 9x\n", "job.sh:1: #SBATCH -t 9x: " + kTime},
      {"unknown_flag", {"--frobnicate=1"}, "", "--frobnicate: unknown option"},
      {"unknown_short", {"-Z"}, "", "-Z: unknown option"},
      {"unknown_directive",
       {},
       "#SBATCH --frobnicate\n",
       "job.sh:1: #SBATCH --frobnicate: unknown option"},
      {"missing_value", {"--partition"}, "", "--partition: needs a value"},
      {"flag_with_value",
       {"--exclusive=user"},
       "",
       "--exclusive=user: --exclusive takes no value"},
      // ---- The job runtime's options, continued ----
      {"signal_bad_name",
       {"--signal=USR9@5"},
       "",
       "--signal 'USR9@5': 'USR9' is not a signal (use e.g. USR1 or 10)"},
      {"signal_bad_time",
       {"--signal=USR1@soon"},
       "",
       "--signal 'USR1@soon': 'soon' is not a time in seconds (0-65535)"},
      {"signal_bad_flag",
       {"--signal=X:USR1"},
       "",
       "--signal 'X:USR1': 'X:' is not a signal option (use B: or R:)"},
      {"signal_zero",
       {"--signal=0"},
       "",
       "--signal '0': '0' is not a signal (use e.g. USR1 or 10)"},
      {"open_mode_bad",
       {"--open-mode=overwrite"},
       "",
       "--open-mode 'overwrite': 'overwrite' is not an open mode (use append or "
       "truncate)"},
      {"export_none_mixed",
       {"--export=NONE,X=1"},
       "",
       "--export 'NONE,X=1': NONE cannot be combined with other names"},
      {"export_empty_name",
       {"--export==1"},
       "",
       "--export '=1': '=1' is not a variable (use VAR or VAR=value)"},
      {"ntasks_zero", {"-n", "0"}, "", "-n '0': '0' is not a task count"},
      {"ntasks_fewer_than_nodes",
       {"-n", "1", "-N", "2"},
       "",
       "-n '1': 1 tasks cannot run on 2 nodes (-N '2')"},
      {"ntasks_over_per_node",
       {"-n", "5", "-N", "2", "--ntasks-per-node=2"},
       "",
       "-n '5': 5 tasks do not fit 2 node(s) of 2 (--ntasks-per-node '2')"},
      {"mincpus_bad",
       {"--mincpus=lots"},
       "",
       "--mincpus 'lots': 'lots' is not a CPU count"},
      {"mem_b_alone",
       {"--mem=4096B"},
       "",
       "--mem '4096B': '4096B' is not a size (use e.g. 512M, 20G, 1T)"},
      {"mem_double_b",
       {"--mem=4GBB"},
       "",
       "--mem '4GBB': '4GBB' is not a size (use e.g. 512M, 20G, 1T)"},
      {"gres_other",
       {"--gres=shard:2"},
       "",
       "--gres 'shard:2': 'shard' is not a GRES Hachi knows (use gpu:N)"},
      {"gres_two",
       {"--gres=gpu:2,shard:1"},
       "",
       "--gres 'gpu:2,shard:1': one GRES only (gpu:N or gpu:MODEL:N)"},
      {"gpus_bad", {"-G", "a100:two"}, "", "-G 'a100:two': 'two' is not a GPU count"},
      {"gres_model_bad_count",
       {"--gres=gpu:h100:x"},
       "",
       "--gres 'gpu:h100:x': 'x' is not a GPU count"},
      {"gpus_uneven",
       {"--gpus=6", "-N", "4"},
       "",
       "--gpus '6': 6 GPUs do not divide evenly over 4 nodes (-N '4')"},
      {"nodes_range",
       {"-N", "2-4"},
       "",
       "-N '2-4': node ranges are not supported; give one count"},
      {"nodes_zero", {"-N", "0"}, "", "-N '0': '0' is not a node count"},
      {"cpus_bad", {"-c", "0"}, "", "-c '0': '0' is not a CPU count"},
      {"mem_bad",
       {"--mem=12Q"},
       "",
       "--mem '12Q': '12Q' is not a size (use e.g. 512M, 20G, 1T)"},
      {"dep_or",
       {"-d", "afterok:1?afterok:2"},
       "",
       "-d 'afterok:1?afterok:2': '?' (any one of) is not supported: Hachi waits for all "
       "dependencies (use ',')"},
      {"dep_kind",
       {"--dependency=aftercorr:5"},
       "",
       "--dependency 'aftercorr:5': 'aftercorr' dependencies are not supported (use "
       "afterok, afterany, afternotok or singleton)"},
      {"dep_singleton_with_id",
       {"--dependency=singleton:4"},
       "",
       "--dependency 'singleton:4': 'singleton' dependencies are not supported (use "
       "afterok, afterany, afternotok or singleton)"},
      {"dep_garbage",
       {"-d", "12"},
       "",
       "-d '12': '12' is not a dependency (use afterok:ID[:ID...], afterany:ID, "
       "afternotok:ID or singleton)"},
      {"dep_no_id",
       {"-d", "afterok"},
       "",
       "-d 'afterok': 'afterok': no job id (use afterok:ID)"},
      {"dep_bad_id",
       {"-d", "afterok:12_3"},
       "",
       "-d 'afterok:12_3': '12_3' is not a job id"},
      {"array_bad",
       {"-a", "1-x"},
       "",
       "-a '1-x': '1-x' is not a task range (use N, N-M or N-M:STEP)"},
      {"array_backwards",
       {"-a", "9-3"},
       "",
       "-a '9-3': '9-3': the range ends before it starts"},
      {"array_too_many",
       {"--array=0-10000"},
       "",
       "--array '0-10000': 10001 tasks; an array has at most 10000"},
      {"array_limit",
       {"--array=1-5%0"},
       "",
       "--array '1-5%0': '0' is not a task limit (use %N, N >= 1)"},
      {"array_step_zero",
       {"--array=0-15:0"},
       "",
       "--array '0-15:0': '0-15:0' is not a task range (use N, N-M or N-M:STEP)"},
      {"share_one",
       {"--gpu-share=1"},
       "",
       "--gpu-share '1': '1' is not a GPU share (use 0 < x < 1, e.g. 0.25)"},
      {"share_zero",
       {"--gpu-share=0.0"},
       "",
       "--gpu-share '0.0': '0.0' is not a GPU share (use 0 < x < 1, e.g. 0.25)"},
      {"share_precision",
       {"--gpu-share=0.1234"},
       "",
       "--gpu-share '0.1234': '0.1234' is not a GPU share (use 0 < x < 1, e.g. 0.25)"},
      {"share_many_gpus",
       {"--gpu-share=0.5", "--gres=gpu:2"},
       "",
       "--gpu-share '0.5': a GPU share is a fraction of one GPU; the job asks for 2 "
       "GPUs"},
      {"gpu_mem_zero",
       {"--gpu-mem=0"},
       "",
       "--gpu-mem '0': GPU memory must be more than 0"},
      {"mem_per_cpu_zero",
       {"--mem-per-cpu=0"},
       "",
       "--mem-per-cpu '0': '0': give memory per CPU above 0"},
      {"gpus_per_task_uneven",
       {"-n", "3", "-N", "2", "--gpus-per-task=1"},
       "",
       "--gpus-per-task '1': 3 tasks do not spread evenly over 2 nodes (give "
       "--ntasks-per-node)"},
      // -C/-w/-x/--begin/--deadline/--nice are read; bad values are errors.
      {"nodelist_directive_bad",
       {},
       "#SBATCH -w n[3-1]\n",
       "job.sh:1: #SBATCH -w n[3-1]: 'n[3-1]' is not a node list: range '3-1' runs "
       "backwards (use names and ranges like n[0001-0016])"},
      {"nodelist_file",
       {"--nodelist=/etc/hosts"},
       "",
       "--nodelist '/etc/hosts': a file of node names is not supported (give the names)"},
      {"constraint_bad",
       {"-C", "ib&"},
       "",
       "-C 'ib&': invalid constraint 'ib&': a feature name is missing at character 4 "
       "(use "
       "names joined by & and |, e.g. 'h100&ib', '[rack1|rack2]')"},
      {"constraint_count",
       {"--constraint=ib*2"},
       "",
       "--constraint 'ib*2': invalid constraint 'ib*2': counts (*N) are not supported by "
       "Hachi at character 3 (use names joined by & and |, e.g. 'h100&ib', "
       "'[rack1|rack2]')"},
      {"begin_bad",
       {"--begin=25:00"},
       "",
       "--begin '25:00': '25:00' is not a time (use HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], "
       "now+N[unit], today, tomorrow, midnight, noon)"},
      {"nice_bad",
       {"--nice=x"},
       "",
       "--nice 'x': 'x' is not a nice value (an integer, e.g. --nice=100)"},
      {"directive_positional",
       {},
       "#SBATCH -p gpu8 extra\n",
       "job.sh:1: #SBATCH extra: not an option"},
      {"directive_quote",
       {},
       "#SBATCH -J \"open\n",
       "job.sh:1: #SBATCH -J \"open: unterminated quote"},
      {"empty_name", {"-J", ""}, "", "-J '': empty job name"},
      // 999999999 x 999999999 overflowed an int (UBSan;
      // fuzz/corpus/fuzz_directives/crash-gres-times-nodes-overflow.sh).
      {"gres_times_nodes_overflow",
       {},
       "#SBATCH --gres=gpu:999999999 --nodes=999999999\n",
       "job.sh:1: #SBATCH --gres=gpu:999999999: 999999999 GPUs on each of 999999999 "
       "nodes "
       "is too many"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<SubmitOptions> r = Parse(c.flags, c.script);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), c.want);
  }
}

TEST(Directives, ScriptRules) {
  const std::string script =
      "#!/bin/bash\n"
      "#SBATCH --job-name=train -p gpu8   # trailing comment\n"
      "#HACHI --gpu-share=0.5\n"
      "\n"
      "# a comment; directives continue\n"
      "#SBATCH -t 1:00:00\n"
      "#SBATCHX --bogus is a comment\n"
      "#SBATCH --comment 'two words'\n"
      "echo start\n"
      "#SBATCH --gres=gpu:8\n";
  Result<ParsedOptions> d = ParseDirectives(script, "job.sh");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->warnings.size(), 1u);
  EXPECT_EQ(d->warnings[0],
            "job.sh:10: #SBATCH: after the first command, ignored (as Slurm does)");
  Result<SubmitOptions> o = BuildSubmitOptions(*d, ParsedOptions{});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->spec.name, "train");
  EXPECT_EQ(o->req.partition, "gpu8");
  EXPECT_EQ(o->req.time_limit, kHour);
  EXPECT_EQ(o->req.gpu_share_milli, 500);
  EXPECT_EQ(o->req.gpus, 1);
  EXPECT_EQ(o->spec.comment, "two words");
}

TEST(Directives, Precedence) {
  // #HACHI beats #SBATCH whatever the line order; flags beat both.
  const std::string script =
      "#HACHI -p hachi-part\n"
      "#SBATCH -p slurm-part\n"
      "#SBATCH -t 10\n"
      "#SBATCH --gres=gpu:2\n";
  Result<SubmitOptions> a = Parse({}, script);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->req.partition, "hachi-part");
  EXPECT_EQ(a->req.time_limit, 10 * kMinute);
  Result<SubmitOptions> b = Parse({"-p", "flag-part", "--time=20", "--gpus=4"}, script);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->req.partition, "flag-part");
  EXPECT_EQ(b->req.time_limit, 20 * kMinute);
  EXPECT_EQ(b->req.gpus, 4);
}

TEST(Directives, FlagsStopAtScript) {
  Result<ParsedOptions> f = ParseFlags({"-p", "gpu8", "train.sh", "--lr", "0.1", "-p"});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->positional, (Args{"train.sh", "--lr", "0.1", "-p"}));
  ASSERT_EQ(f->options.size(), 1u);
  EXPECT_EQ(f->options[0].name, "partition");
  Result<ParsedOptions> g = ParseFlags({"-H", "--", "-weird-name.sh"});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->positional, (Args{"-weird-name.sh"}));
}

// --export, applied to the submitter's environment.
TEST(Directives, ExportEnvironment) {
  const state::EnvList submitter = {{"PATH", "/bin"}, {"A", "a"}, {"HOME", "/h"}};
  ExportSpec all;
  EXPECT_EQ(ExportEnvironment(all, submitter), submitter);
  ExportSpec none;
  none.all = false;
  none.none = true;
  EXPECT_TRUE(ExportEnvironment(none, submitter).empty());
  ExportSpec all_plus;
  all_plus.vars = {{"X", "1"}, {"A", "b"}};
  EXPECT_EQ(ExportEnvironment(all_plus, submitter),
            (state::EnvList{{"PATH", "/bin"}, {"A", "b"}, {"HOME", "/h"}, {"X", "1"}}));
  ExportSpec list;
  list.all = false;
  list.vars = {{"A", std::nullopt}, {"B", "2"}, {"MISSING", std::nullopt}};
  EXPECT_EQ(ExportEnvironment(list, submitter), (state::EnvList{{"A", "a"}, {"B", "2"}}));
}

TEST(Directives, ExpandArray) {
  struct Case {
    std::string name, text;
    std::vector<int> want;
  };
  const std::vector<Case> cases = {
      {"range", "1-4", {1, 2, 3, 4}},           {"list", "1,3,5", {1, 3, 5}},
      {"step", "0-15:4", {0, 4, 8, 12}},        {"single", "7", {7}},
      {"mixed_dedup", "5,1-3,2", {1, 2, 3, 5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<ArraySpec> a = ParseArraySpec(c.text);
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(ExpandArray(*a), c.want);
  }
  Result<ArraySpec> big = ParseArraySpec("0-9999%10");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(ExpandArray(*big).size(), 10000u);
}

// Node selection, timing and the new dependency kinds.
TEST(Directives, NodeSelectionAndTiming) {
  Result<SubmitOptions> r = Parse(
      {"-C", "h100&[rack1|rack2]", "-w", "gpu[01-02]", "--exclude=gpu07",
       "--begin=now+1hour", "--deadline", "2099-01-01", "-d", "afternotok:5,singleton"},
      "#SBATCH --nice\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->req.constraint, "h100&[rack1|rack2]");
  EXPECT_EQ(r->req.nodelist, "gpu[01-02]");
  EXPECT_EQ(r->req.exclude, "gpu07");
  EXPECT_EQ(r->req.nice, 100);  // --nice alone
  EXPECT_EQ(r->begin_text, "now+1hour");
  ASSERT_EQ(r->req.dependencies.size(), 2u);
  EXPECT_EQ(r->req.dependencies[0].kind, sched::DependencyKind::kAfterNotOk);
  EXPECT_EQ(r->req.dependencies[0].job, 5);
  EXPECT_EQ(r->req.dependencies[1].kind, sched::DependencyKind::kSingleton);
  EXPECT_TRUE(r->warnings.empty());

  // The times against a fixed clock, UTC: 2026-12-02 14:30.
  const Time now = 1796221800;
  ASSERT_TRUE(ResolveSubmitTimes(now, 0, &*r).ok());
  EXPECT_EQ(r->req.begin_time, now + kHour);
  EXPECT_EQ(r->req.deadline, 4070908800);  // 2099-01-01T00:00:00Z

  Result<SubmitOptions> n = Parse({"--nice=-5", "--begin=now"});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->req.nice, -5);
  ASSERT_TRUE(ResolveSubmitTimes(now, 0, &*n).ok());
  EXPECT_EQ(n->req.begin_time, 0);  // not in the future: no limit

  Result<SubmitOptions> late = Parse({"--deadline=now-60"});
  ASSERT_TRUE(late.ok());
  const Status s = ResolveSubmitTimes(now, 0, &*late);
  EXPECT_EQ(s.message(), "--deadline now-60: the time has passed");
}

}  // namespace
}  // namespace hachi::cli
