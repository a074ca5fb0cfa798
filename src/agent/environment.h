// The environment and output files of a job's process on this node (DESIGN.md §3: the
// agent "sets up ... environment"). Built from the api::LaunchSpec alone, so the server,
// the launcher and the tests agree on what a job sees.
//
// Pure functions of their arguments, except that JobEnvironment reads the user's
// passwd entry (for HOME). Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/launch_spec.h"
#include "api/output_paths.h"  // ExpandOutputPath, JobOutputFiles, JobName
#include "api/protocol.h"

namespace hachi::agent {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// The job's environment, in a deterministic order: the submitter's variables
// (spec.spec.env, in their order, the last of duplicate names winning) less every name
// Hachi sets, then Hachi's variables in a fixed order:
//   - GPUs: CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES (node-local indices, ascending,
//     comma-separated; no GPUs: "" and "void"), CUDA_DEVICE_ORDER=PCI_BUS_ID (the
//     indices are NVML's, which follow the PCI bus; CUDA's default "fastest first"
//     order would reinterpret them on nodes with mixed GPUs);
//   - HACHI_JOB_ID, HACHI_JOB_NAME, HACHI_NODELIST, HACHI_NODENAME, HACHI_GPUS,
//     HACHI_NODE_RANK, HACHI_NNODES, HACHI_PARTITION, HACHI_SUBMIT_DIR (the workdir: the
//     spec carries no separate submit directory), HACHI_ARRAY_JOB_ID /
//     HACHI_ARRAY_TASK_ID for array tasks;
//   - Slurm's names that scripts rely on (SLURM_JOB_ID, SLURM_JOBID, SLURM_JOB_NAME,
//     SLURM_JOB_NODELIST, SLURM_NODELIST, SLURM_NNODES, SLURM_JOB_NUM_NODES,
//     SLURM_NODEID, SLURM_JOB_PARTITION, SLURM_JOB_GPUS, SLURM_GPUS_ON_NODE,
//     SLURM_CPUS_ON_NODE, SLURM_JOB_UID, SLURM_JOB_GID, SLURM_JOB_USER,
//     SLURM_SUBMIT_DIR, SLURMD_NODENAME, SLURM_ARRAY_*). SLURM_JOB_NODELIST and
//     SLURM_NODELIST are in Slurm's compressed form ("gpu[01-04]", CompressHostList),
//     HACHI_NODELIST a comma list in rank order. SLURM_JOB_CPUS_PER_NODE and
//     SLURM_TASKS_PER_NODE in Slurm's repeat form ("8(x2)"). SLURM_NTASKS /
//     SLURM_NPROCS only when the job asked for tasks (-n, or --ntasks-per-node x nodes),
//     SLURM_NTASKS_PER_NODE and SLURM_CPUS_PER_TASK only when given, as sbatch sets
//     them: frameworks (PyTorch Lightning) read SLURM_NTASKS as "srun started one task
//     per GPU" and would not spawn their own workers. SLURM_RESTART_COUNT once the job
//     was requeued (LaunchSpec::restart_count > 0). SLURM_PROCID is absent (job steps);
//   - torchrun: MASTER_ADDR (node_addresses[0]; else nodelist[0] for several nodes;
//     else 127.0.0.1), MASTER_PORT, WORLD_SIZE (nodes x NPROC_PER_NODE), NODE_RANK,
//     NPROC_PER_NODE (gpus_per_node, else this node's GPU count, at least 1) and the
//     PET_* copies torchrun reads its options from;
//   - GPU shares (share_milli > 0): MpsEnvironment's MPS limits;
//   - HACHI_JOB_TOKEN, the run's job credential (spec.credential, server/auth.h), when
//     the server gave one: srun and the other commands inside the job use it;
//   - USER, LOGNAME (spec.user) and HOME (from the passwd entry) when the user is known.
// Inherited HACHI_*, SLURM_*, PET_* and CUDA_MPS_* variables are dropped: a job
// submitted from inside another job must not see the outer job's array index or limits.
EnvList JobEnvironment(const api::LaunchSpec& spec);

// The environment of one task of a job step: srun's environment
// (`launch.env`), then every variable JobEnvironment gives the job on this node
// (`job`: its launch here) — those that differ between nodes (GPUs, node name and rank,
// CPUs on the node, HOME/USER/LOGNAME) replace srun's, the others only fill in what
// srun's lacks (a script's `export MASTER_PORT=...` before srun holds) — then the step's
// and the task's: SLURM_STEP_ID/SLURM_STEPID, SLURM_PROCID (`rank`), SLURM_LOCALID
// (`local`), SLURM_NODEID (this node's place in the step), SLURM_NTASKS/SLURM_NPROCS and
// SLURM_STEP_NUM_TASKS, SLURM_STEP_NUM_NODES and SLURM_NNODES, SLURM_STEP_NODELIST and
// SLURM_NODELIST (compressed), SLURM_STEP_TASKS_PER_NODE and SLURM_TASKS_PER_NODE,
// SLURM_CPUS_PER_TASK and SLURM_GPUS_PER_TASK when given, HACHI_STEP_ID. With
// gpus_per_task, CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES/SLURM_STEP_GPUS hold the
// task's own GPUs: the node's GPUs (ascending), gpus_per_task of them per local task in
// order; otherwise the node's.
EnvList StepEnvironment(const api::LaunchSpec& job, const api::StepLaunch& launch,
                        int rank, int local);

// The GPUs a step's task sees (see StepEnvironment): empty when gpus_per_task asks for
// more than the node has for its local index.
GpuSet TaskGpus(const api::LaunchSpec& job, const api::StepLaunch& launch, int local);

// The MPS variables of a GPU share (share_milli > 0), in this order:
//   CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY = spec.mps_pipe_dir, mps_log_dir,
//                                       when the agent's MPS daemon serves it (mps.h)
//   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = ceil(share_milli / 10)   ("25" for 250)
//   CUDA_MPS_PINNED_DEVICE_MEM_LIMIT  = "0=<MiB>M"               ("0=20480M"),
//                                       only when memory is promised: the ordinal is
//                                       the client's, and a share sees one GPU, as 0.
// (CUDA_VISIBLE_DEVICES is then spec.mps_device: its GPU as its MPS server shows it.)
// Empty for a whole-GPU allocation (share_milli == 0).
EnvList MpsEnvironment(const api::LaunchSpec& spec);

}  // namespace hachi::agent
