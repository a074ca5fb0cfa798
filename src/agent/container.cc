#include "agent/container.h"

#include <algorithm>
#include <string_view>

#include "api/container_image.h"

namespace hachi::agent {
namespace {

// Host-specific variables a container keeps from its image.
bool KeepsImageValue(std::string_view name) {
  return name == "PATH" || name == "HOME" || name == "LD_LIBRARY_PATH" ||
         name == "HOSTNAME";
}

// The job environment as seen inside a container that renumbers its GPUs 0..n-1.
// NVIDIA_VISIBLE_DEVICES keeps the host's indices: the nvidia hook may read it from the
// container's environment to choose devices, and those are the ones --gpus/--device
// asked for.
EnvList RenumberGpus(const api::LaunchSpec& spec, EnvList env) {
  const std::string inside = GpuSet::FirstN(spec.gpus.size()).ToList();
  for (auto& [k, v] : env) {
    if (k == "CUDA_VISIBLE_DEVICES") {
      if (spec.mig.empty()) v = inside;  // MIG devices keep their UUIDs
    } else if (k == "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") {
      const size_t eq = v.find('=');
      if (eq != std::string::npos) v = "0" + v.substr(eq);  // a share holds one GPU
    }
  }
  return env;
}

Result<ContainerLaunch> DockerLike(const ContainerRuntime& rt,
                                   const api::LaunchSpec& spec,
                                   const std::vector<std::string>& argv,
                                   const EnvList& job_env,
                                   const std::vector<std::string>& binds) {
  const bool docker = rt.kind == "docker";
  const std::string& wd =
      spec.spec.workdir.empty() ? std::string("/") : spec.spec.workdir;
  ContainerLaunch c;
  c.env = RenumberGpus(spec, job_env);
  auto& a = c.argv;
  a = {rt.binary.empty() ? rt.kind : rt.binary, "run",   "--rm", "--name",
       "hachi-job-" + std::to_string(spec.job), "--init"};
  if (!spec.gpus.empty()) {
    if (docker) {
      // Docker splits --gpus on commas unless the device list is quoted inside the
      // value itself.
      a.insert(a.end(), {"--gpus", "\"device=" + spec.gpus.ToList() + "\""});
    } else {
      for (int g : spec.gpus.Indices()) {
        a.insert(a.end(), {"--device", "nvidia.com/gpu=" + std::to_string(g)});
      }
    }
  }
  a.push_back("--ipc=host");  // NCCL and DataLoader workers share memory through /dev/shm
  if (spec.spec.shm_mib > 0)
    a.push_back("--shm-size=" + std::to_string(spec.spec.shm_mib) + "m");
  a.insert(a.end(),
           {"--ulimit", "memlock=-1", "--ulimit", "stack=67108864", "--network", "host",
            "--user", std::to_string(spec.spec.uid) + ":" + std::to_string(spec.spec.gid),
            "-v", wd + ":" + wd});
  for (const std::string& b : binds) a.insert(a.end(), {"-v", b + ":" + b + ":ro"});
  a.insert(a.end(), {"-w", wd});
  for (const auto& kv : c.env) {
    if (!KeepsImageValue(kv.first)) a.insert(a.end(), {"-e", kv.first});
  }
  a.insert(a.end(), rt.extra_args.begin(), rt.extra_args.end());
  // The end of the runtime's options (docker and podman parse with pflag, which stops
  // at "--"): whatever the image is, it is not a flag (CheckContainerImage
  // already refused a leading '-').
  a.push_back("--");
  a.push_back(spec.spec.container_image);
  a.insert(a.end(), argv.begin(), argv.end());
  return c;
}

Result<ContainerLaunch> Apptainer(const ContainerRuntime& rt, const api::LaunchSpec& spec,
                                  const std::vector<std::string>& argv,
                                  const EnvList& job_env,
                                  const std::vector<std::string>& binds) {
  const std::string& wd =
      spec.spec.workdir.empty() ? std::string("/") : spec.spec.workdir;
  ContainerLaunch c;
  c.env = job_env;
  for (const auto& [k, v] : job_env) {
    if (!KeepsImageValue(k)) c.env.emplace_back("APPTAINERENV_" + k, v);
  }
  auto& a = c.argv;
  a = {rt.binary.empty() ? rt.kind : rt.binary, "exec", "--nv", "--bind", wd};
  for (const std::string& b : binds) a.insert(a.end(), {"--bind", b + ":" + b + ":ro"});
  a.insert(a.end(), {"--pwd", wd});
  a.insert(a.end(), rt.extra_args.begin(), rt.extra_args.end());
  // No "--" here: not checked against a real apptainer on this machine, so the image
  // is kept where its documentation puts it; CheckContainerImage (a leading '-' is
  // refused) is what keeps it from being read as an option.
  a.push_back(spec.spec.container_image);
  a.insert(a.end(), argv.begin(), argv.end());
  return c;
}

}  // namespace

Result<ContainerLaunch> PrepareContainer(const ContainerRuntime& rt,
                                         const api::LaunchSpec& spec,
                                         const std::vector<std::string>& argv,
                                         const EnvList& job_env,
                                         const std::vector<std::string>& binds) {
  if (spec.spec.container_image.empty()) {
    return InvalidArgument("job " + std::to_string(spec.job) +
                           " names no container image");
  }
  // Defence in depth: the server refused these at submit already.
  if (Status st = api::CheckContainerImage(spec.spec.container_image); !st.ok()) {
    return InvalidArgument("job " + std::to_string(spec.job) + ": " + st.message());
  }
  if (rt.kind == "docker" || rt.kind == "podman") {
    return DockerLike(rt, spec, argv, job_env, binds);
  }
  if (rt.kind == "apptainer") return Apptainer(rt, spec, argv, job_env, binds);
  if (rt.kind.empty()) {
    return InvalidArgument("job " + std::to_string(spec.job) +
                           " asks for container image " + spec.spec.container_image +
                           " but this agent has no container runtime configured");
  }
  return InvalidArgument("unknown container runtime '" + rt.kind +
                         "' (known: docker, podman, apptainer)");
}

Result<std::vector<std::string>> ContainerCommand(const ContainerRuntime& rt,
                                                  const api::LaunchSpec& spec,
                                                  const std::vector<std::string>& argv) {
  Result<ContainerLaunch> c = PrepareContainer(rt, spec, argv, JobEnvironment(spec));
  if (!c.ok()) return c.status();
  return std::move(c->argv);
}

}  // namespace hachi::agent
