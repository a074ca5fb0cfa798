// Running a job inside a container image (--container-image): the command line for the
// configured runtime (docker, podman with CDI, apptainer) and the environment its
// process gets. The launcher execs the result in place of the job's own command.
//
// Docker and podman renumber GPUs inside the container (the container sees only the
// devices it was given, as 0..n-1), so there CUDA_VISIBLE_DEVICES and the MPS memory
// limit use the container's indices; NVIDIA_VISIBLE_DEVICES (read by the nvidia hook),
// HACHI_GPUS and SLURM_JOB_GPUS keep the node's. Apptainer shares the host's device
// view and keeps the node's indices everywhere.
//
// Stopping: docker/podman get `--init`, so the SIGTERM the launcher sends to the
// runtime's process group (which `docker run` forwards to the container) reaches the
// job's process instead of a PID 1 that ignores it. A SIGKILL after the grace only
// kills the client; the container itself is then removed by `--rm` only once it exits
// (known gap: `docker kill hachi-job-<id>` on escalation, with the job's cgroup).
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "agent/environment.h"
#include "api/launch_spec.h"
#include "core/status.h"

namespace hachi::agent {

struct ContainerRuntime {
  std::string kind;    // "docker", "podman" or "apptainer"; "" = none configured
  std::string binary;  // path or name looked up in PATH; "" = the kind's name
  std::vector<std::string> extra_args;  // run options placed before the image (e.g.
                                        // podman's "--userns=keep-id")
};

struct ContainerLaunch {
  std::vector<std::string> argv;  // the runtime's command line
  EnvList env;                    // the runtime process's environment
};

// The runtime command line and process environment for `argv` in spec's image, given
// the job's environment `job_env` (JobEnvironment). Variables are passed by name
// (`-e NAME`, or APPTAINERENV_NAME in the environment), never with their values on the
// command line, where every user could read them. PATH, HOME, LD_LIBRARY_PATH and
// HOSTNAME stay the image's. `binds` are extra host paths mounted read-only at the same
// place (the spooled batch script). kInvalidArgument for an unknown kind, an empty
// image, or one api::CheckContainerImage refuses (a leading '-': never an option of the
// runtime; the server refused it at submit already).
Result<ContainerLaunch> PrepareContainer(const ContainerRuntime& rt,
                                         const api::LaunchSpec& spec,
                                         const std::vector<std::string>& argv,
                                         const EnvList& job_env,
                                         const std::vector<std::string>& binds = {});

// The command line alone, for JobEnvironment(spec).
//   docker:    docker run --rm --name hachi-job-<id> --init --gpus "device=0,1"
//              --ipc=host [--shm-size=<N>m] --ulimit memlock=-1 --ulimit stack=67108864
//              --network host --user uid:gid -v wd:wd -w wd -e NAME... [extra] -- image
//              argv
//   podman:    the same with --device nvidia.com/gpu=<i> per GPU (CDI) for --gpus
//   apptainer: apptainer exec --nv --bind wd --pwd wd [extra] image argv
Result<std::vector<std::string>> ContainerCommand(const ContainerRuntime& rt,
                                                  const api::LaunchSpec& spec,
                                                  const std::vector<std::string>& argv);

}  // namespace hachi::agent
