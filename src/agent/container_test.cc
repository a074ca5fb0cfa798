#include "agent/container.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "agent/testing.h"

namespace hachi::agent {
namespace {

using Argv = std::vector<std::string>;

const EnvList kJobEnv = {{"PATH", "/usr/bin"},
                         {"FOO", "bar"},
                         {"CUDA_VISIBLE_DEVICES", "2,5"},
                         {"HACHI_GPUS", "2,5"}};

struct ArgvCase {
  std::string name;
  ContainerRuntime rt;
  api::LaunchSpec spec;
  Argv want;
};

class ContainerArgvTest : public testing::TestWithParam<ArgvCase> {};

TEST_P(ContainerArgvTest, ExactCommandLine) {
  const ArgvCase& c = GetParam();
  Result<ContainerLaunch> got =
      PrepareContainer(c.rt, c.spec, {"python", "train.py"}, kJobEnv);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->argv, c.want);
}

LaunchBuilder Job() {
  return MakeLaunch(17)
      .Gpus({2, 5})
      .User("alice", 1000, 100)
      .Workdir("/home/alice/run")
      .Image("nvcr.io/nvidia/pytorch:24.05-py3");
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ContainerArgvTest,
    testing::Values(
        ArgvCase{"docker",
                 {"docker", "", {}},
                 Job().Shm(8192),
                 {"docker",       "run",
                  "--rm",         "--name",
                  "hachi-job-17", "--init",
                  "--gpus",       "\"device=2,5\"",
                  "--ipc=host",   "--shm-size=8192m",
                  "--ulimit",     "memlock=-1",
                  "--ulimit",     "stack=67108864",
                  "--network",    "host",
                  "--user",       "1000:100",
                  "-v",           "/home/alice/run:/home/alice/run",
                  "-w",           "/home/alice/run",
                  "-e",           "FOO",
                  "-e",           "CUDA_VISIBLE_DEVICES",
                  "-e",           "HACHI_GPUS",
                  "--",           "nvcr.io/nvidia/pytorch:24.05-py3",
                  "python",       "train.py"}},
        ArgvCase{"docker_no_gpus_binary_extra",
                 {"docker", "/usr/local/bin/docker", {"--pull=never"}},
                 MakeLaunch(3).User("bob", 1001, 1001).Workdir("/w").Image("alpine"),
                 {"/usr/local/bin/docker",
                  "run",
                  "--rm",
                  "--name",
                  "hachi-job-3",
                  "--init",
                  "--ipc=host",
                  "--ulimit",
                  "memlock=-1",
                  "--ulimit",
                  "stack=67108864",
                  "--network",
                  "host",
                  "--user",
                  "1001:1001",
                  "-v",
                  "/w:/w",
                  "-w",
                  "/w",
                  "-e",
                  "FOO",
                  "-e",
                  "CUDA_VISIBLE_DEVICES",
                  "-e",
                  "HACHI_GPUS",
                  "--pull=never",
                  "--",
                  "alpine",
                  "python",
                  "train.py"}},
        ArgvCase{"podman_cdi",
                 {"podman", "", {}},
                 Job(),
                 {"podman",
                  "run",
                  "--rm",
                  "--name",
                  "hachi-job-17",
                  "--init",
                  "--device",
                  "nvidia.com/gpu=2",
                  "--device",
                  "nvidia.com/gpu=5",
                  "--ipc=host",
                  "--ulimit",
                  "memlock=-1",
                  "--ulimit",
                  "stack=67108864",
                  "--network",
                  "host",
                  "--user",
                  "1000:100",
                  "-v",
                  "/home/alice/run:/home/alice/run",
                  "-w",
                  "/home/alice/run",
                  "-e",
                  "FOO",
                  "-e",
                  "CUDA_VISIBLE_DEVICES",
                  "-e",
                  "HACHI_GPUS",
                  "--",
                  "nvcr.io/nvidia/pytorch:24.05-py3",
                  "python",
                  "train.py"}},
        ArgvCase{"apptainer",
                 {"apptainer", "", {}},
                 Job().Image("/images/pt.sif"),
                 {"apptainer", "exec", "--nv", "--bind", "/home/alice/run", "--pwd",
                  "/home/alice/run", "/images/pt.sif", "python", "train.py"}}),
    [](const testing::TestParamInfo<ArgvCase>& row) { return row.param.name; });

std::string Get(const EnvList& env, const std::string& k) {
  for (const auto& kv : env) {
    if (kv.first == k) return kv.second;
  }
  return "<absent>";
}

TEST(PrepareContainer, DockerRenumbersGpusInsideKeepsHostIndicesInHachiGpus) {
  Result<ContainerLaunch> c = PrepareContainer({"docker", "", {}}, Job(), {"x"}, kJobEnv);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Get(c->env, "CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(Get(c->env, "HACHI_GPUS"), "2,5");
  EXPECT_EQ(Get(c->env, "PATH"), "/usr/bin");  // for finding the docker binary
}

TEST(PrepareContainer, ShareLimitUsesTheContainersIndexNvidiaDevicesTheHosts) {
  api::LaunchSpec spec = Job().Gpus({5}).Share(250, 1000);
  Result<ContainerLaunch> c =
      PrepareContainer({"podman", "", {}}, spec, {"x"}, JobEnvironment(spec));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Get(c->env, "CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(Get(c->env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=1000M");
  EXPECT_EQ(Get(c->env, "NVIDIA_VISIBLE_DEVICES"), "5");
  EXPECT_EQ(Get(c->env, "HACHI_GPUS"), "5");
}

TEST(PrepareContainer, ApptainerPassesEnvThroughApptainerenv) {
  Result<ContainerLaunch> c =
      PrepareContainer({"apptainer", "", {}}, Job(), {"x"}, kJobEnv);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Get(c->env, "APPTAINERENV_FOO"), "bar");
  EXPECT_EQ(Get(c->env, "APPTAINERENV_CUDA_VISIBLE_DEVICES"), "2,5");
  EXPECT_EQ(Get(c->env, "APPTAINERENV_PATH"), "<absent>");
  EXPECT_EQ(Get(c->env, "FOO"), "bar");
}

TEST(PrepareContainer, BindsScriptReadOnly) {
  Result<ContainerLaunch> d = PrepareContainer(
      {"docker", "", {}}, Job(), {"/spool/job-17.sh"}, {}, {"/spool/job-17.sh"});
  ASSERT_TRUE(d.ok());
  const Argv bind = {"-v", "/spool/job-17.sh:/spool/job-17.sh:ro"};
  EXPECT_NE(std::search(d->argv.begin(), d->argv.end(), bind.begin(), bind.end()),
            d->argv.end());
  Result<ContainerLaunch> a = PrepareContainer(
      {"apptainer", "", {}}, Job(), {"/spool/job-17.sh"}, {}, {"/spool/job-17.sh"});
  ASSERT_TRUE(a.ok());
  EXPECT_NE(
      std::find(a->argv.begin(), a->argv.end(), "/spool/job-17.sh:/spool/job-17.sh:ro"),
      a->argv.end());
}

TEST(ContainerCommand, PassesEveryJobVariableByName) {
  api::LaunchSpec spec = Job().Env("SECRET_TOKEN", "hunter2");
  Result<Argv> argv = ContainerCommand({"docker", "", {}}, spec, {"true"});
  ASSERT_TRUE(argv.ok());
  for (const auto& [k, v] : JobEnvironment(spec)) {
    const bool passed = std::find(argv->begin(), argv->end(), k) != argv->end();
    EXPECT_EQ(passed, k != "PATH" && k != "HOME") << k;
  }
  EXPECT_EQ(std::find(argv->begin(), argv->end(), "hunter2"), argv->end());
}

struct ErrorCase {
  std::string name;
  ContainerRuntime rt;
  api::LaunchSpec spec;
  std::string mention;
};

class ContainerErrorTest : public testing::TestWithParam<ErrorCase> {};

TEST_P(ContainerErrorTest, InvalidArgumentNamingIt) {
  Result<Argv> got = ContainerCommand(GetParam().rt, GetParam().spec, {"true"});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find(GetParam().mention), std::string::npos)
      << got.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ContainerErrorTest,
    testing::Values(ErrorCase{"unknown_kind", {"lxc", "", {}}, Job(), "'lxc'"},
                    ErrorCase{"no_runtime", {"", "", {}}, Job(), "no container runtime"},
                    ErrorCase{"empty_image",
                              {"docker", "", {}},
                              Job().Image(""),
                              "no container image"},
                    // Never an option of the runtime, whatever the server let
                    // through.
                    ErrorCase{"image_is_an_option",
                              {"docker", "", {}},
                              Job().Image("--user=0"),
                              "container_image: '--user=0' starts with '-'"},
                    ErrorCase{"apptainer_image_is_an_option",
                              {"apptainer", "", {}},
                              Job().Image("-B/:/host"),
                              "starts with '-'"},
                    ErrorCase{"image_with_a_space",
                              {"podman", "", {}},
                              Job().Image("alpine --privileged"),
                              "' ' at byte 6"}),
    [](const testing::TestParamInfo<ErrorCase>& row) { return row.param.name; });

}  // namespace
}  // namespace hachi::agent
