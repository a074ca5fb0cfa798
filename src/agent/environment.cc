#include "agent/environment.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "core/hostlist.h"

namespace hachi::agent {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) {
    if (!out.empty()) out += ',';
    out += s;
  }
  return out;
}

bool IsArrayTask(const api::LaunchSpec& spec) { return spec.spec.array_task_id >= 0; }

int NodeCount(const api::LaunchSpec& spec) {
  return std::max<int>(1, static_cast<int>(spec.nodelist.size()));
}

int ProcsPerNode(const api::LaunchSpec& spec) {
  if (spec.gpus_per_node > 0) return spec.gpus_per_node;
  return std::max(1, spec.gpus.size());
}

std::string NodeList(const api::LaunchSpec& spec) {
  return spec.nodelist.empty() ? spec.node : Join(spec.nodelist);
}

std::string MasterAddr(const api::LaunchSpec& spec) {
  if (!spec.node_addresses.empty() && !spec.node_addresses[0].empty()) {
    return spec.node_addresses[0];
  }
  if (spec.nodelist.size() > 1) return spec.nodelist[0];
  return "127.0.0.1";
}

// The user's home directory from the passwd database; "" when unknown.
std::string HomeOf(const std::string& user) {
  if (user.empty()) return "";
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  if (getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found) {
    return "";
  }
  return found->pw_dir ? found->pw_dir : "";
}

// Names the job must not inherit from its submitter: Hachi's, and those of the
// launchers and limits Hachi sets, whether or not this job gets them.
bool IsManagedPrefix(std::string_view name) {
  for (std::string_view p : {"HACHI_", "SLURM_", "PET_", "CUDA_MPS_"}) {
    if (name.substr(0, p.size()) == p) return true;
  }
  return false;
}

// Slurm's repeat form of per-node counts: {2, 2, 1} -> "2(x2),1".
std::string RepeatForm(const std::vector<int>& counts) {
  std::string out;
  for (size_t i = 0; i < counts.size();) {
    size_t j = i;
    while (j + 1 < counts.size() && counts[j + 1] == counts[i]) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(counts[i]);
    if (j > i) out += "(x" + std::to_string(j - i + 1) + ")";
    i = j + 1;
  }
  return out;
}

// The job's task count as Slurm's sbatch sets it: -n, else --ntasks-per-node on each
// node; 0 when neither was given.
int TaskCount(const api::LaunchSpec& spec) {
  if (spec.spec.ntasks > 0) return spec.spec.ntasks;
  return spec.spec.ntasks_per_node * NodeCount(spec);
}

// Tasks on each node, in node order: --ntasks-per-node each (the last ones fewer when -n
// runs out), else -n spread as Slurm's block distribution does (the first nodes one
// more); without either, this node's CPUs / --cpus-per-task on every node (what Slurm
// prints for a job without -n).
std::vector<int> TasksPerNode(const api::LaunchSpec& spec) {
  const int nodes = NodeCount(spec);
  std::vector<int> counts(static_cast<size_t>(nodes), 0);
  const int tasks = TaskCount(spec);
  if (tasks <= 0) {
    const int per = std::max(1, spec.cpus / std::max(1, spec.spec.cpus_per_task));
    std::fill(counts.begin(), counts.end(), per);
    return counts;
  }
  if (spec.spec.ntasks_per_node > 0) {
    int left = tasks;
    for (int& c : counts) {
      c = std::min(left, spec.spec.ntasks_per_node);
      left -= c;
    }
    return counts;
  }
  for (int i = 0; i < nodes; ++i) {
    counts[static_cast<size_t>(i)] = tasks / nodes + (i < tasks % nodes ? 1 : 0);
  }
  return counts;
}

// The GPUs as CUDA and the container toolkit see them, and HACHI_*.
void AddHachiVariables(const api::LaunchSpec& spec, EnvList* ours) {
  const std::string gpus = spec.gpus.ToList();
  const std::string job = std::to_string(spec.job);
  const std::string nodelist = NodeList(spec);
  const std::string nnodes = std::to_string(NodeCount(spec));
  const std::string rank = std::to_string(spec.node_rank);
  const std::string name = api::JobName(spec);
  auto set = [ours](std::string k, std::string v) {
    ours->emplace_back(std::move(k), std::move(v));
  };
  // A share served by MPS names its GPU as its server shows it (MpsEnvironment); MIG
  // devices are named by their UUIDs, "MIG-...", which CUDA and the
  // container toolkit both take.
  std::string mig;
  for (const api::MigLaunch& m : spec.mig) {
    if (!mig.empty()) mig += ",";
    mig += m.uuid.rfind("MIG-", 0) == 0 ? m.uuid : "MIG-" + m.uuid;
  }
  set("CUDA_VISIBLE_DEVICES", !mig.empty()              ? mig
                              : spec.mps_device.empty() ? gpus
                                                        : spec.mps_device);
  set("NVIDIA_VISIBLE_DEVICES", !mig.empty() ? mig : spec.gpus.empty() ? "void" : gpus);
  set("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  set("HACHI_JOB_ID", job);
  set("HACHI_JOB_NAME", name);
  set("HACHI_NODELIST", nodelist);
  set("HACHI_NODENAME", spec.node);
  set("HACHI_GPUS", gpus);
  set("HACHI_NODE_RANK", rank);
  set("HACHI_NNODES", nnodes);
  set("HACHI_PARTITION", spec.partition);
  set("HACHI_SUBMIT_DIR", spec.spec.workdir);
  if (IsArrayTask(spec)) {
    set("HACHI_ARRAY_JOB_ID", std::to_string(spec.spec.array_job_id));
    set("HACHI_ARRAY_TASK_ID", std::to_string(spec.spec.array_task_id));
  }
}

// SLURM_*, as sbatch and slurmd set them.
void AddSlurmVariables(const api::LaunchSpec& spec, EnvList* ours) {
  const std::string gpus = spec.gpus.ToList();
  const std::string job = std::to_string(spec.job);
  const std::string nnodes = std::to_string(NodeCount(spec));
  const std::string rank = std::to_string(spec.node_rank);
  const std::string name = api::JobName(spec);
  auto set = [ours](std::string k, std::string v) {
    ours->emplace_back(std::move(k), std::move(v));
  };
  set("SLURM_JOB_ID", job);
  set("SLURM_JOBID", job);
  set("SLURM_JOB_NAME", name);
  // Slurm's compressed form (scontrol show hostnames expands it).
  const std::string hostlist = CompressHostList(
      spec.nodelist.empty() ? std::vector<std::string>{spec.node} : spec.nodelist);
  set("SLURM_JOB_NODELIST", hostlist);
  set("SLURM_NODELIST", hostlist);
  set("SLURM_NNODES", nnodes);
  set("SLURM_JOB_NUM_NODES", nnodes);
  set("SLURM_NODEID", rank);
  set("SLURM_JOB_PARTITION", spec.partition);
  set("SLURM_JOB_GPUS", gpus);
  set("SLURM_GPUS_ON_NODE", std::to_string(spec.gpus.size()));
  if (spec.cpus > 0) {
    set("SLURM_CPUS_ON_NODE", std::to_string(spec.cpus));
    set("SLURM_JOB_CPUS_PER_NODE",
        RepeatForm(std::vector<int>(static_cast<size_t>(NodeCount(spec)), spec.cpus)));
  }
  // Tasks, as sbatch sets them (only what the job asked for, but
  // SLURM_TASKS_PER_NODE always), and the requeue count once there was one.
  if (const int tasks = TaskCount(spec); tasks > 0) {
    set("SLURM_NTASKS", std::to_string(tasks));
    set("SLURM_NPROCS", std::to_string(tasks));
  }
  if (spec.spec.ntasks_per_node > 0) {
    set("SLURM_NTASKS_PER_NODE", std::to_string(spec.spec.ntasks_per_node));
  }
  set("SLURM_TASKS_PER_NODE", RepeatForm(TasksPerNode(spec)));
  if (spec.spec.cpus_per_task > 0) {
    set("SLURM_CPUS_PER_TASK", std::to_string(spec.spec.cpus_per_task));
  }
  if (spec.restart_count > 0) {
    set("SLURM_RESTART_COUNT", std::to_string(spec.restart_count));
  }
  set("SLURM_JOB_UID", std::to_string(spec.spec.uid));
  set("SLURM_JOB_GID", std::to_string(spec.spec.gid));
  if (!spec.user.empty()) set("SLURM_JOB_USER", spec.user);
  set("SLURM_SUBMIT_DIR", spec.spec.workdir);
  set("SLURMD_NODENAME", spec.node);
  if (IsArrayTask(spec)) {
    set("SLURM_ARRAY_JOB_ID", std::to_string(spec.spec.array_job_id));
    set("SLURM_ARRAY_TASK_ID", std::to_string(spec.spec.array_task_id));
  }
}

// What torchrun and friends read (MASTER_*, PET_*), MPS's, the job's token and
// who it runs as.
void AddLauncherVariables(const api::LaunchSpec& spec, EnvList* ours) {
  const std::string nnodes = std::to_string(NodeCount(spec));
  const std::string rank = std::to_string(spec.node_rank);
  const std::string nproc = std::to_string(ProcsPerNode(spec));
  const std::string master = MasterAddr(spec);
  const std::string port = std::to_string(spec.master_port);
  auto set = [ours](std::string k, std::string v) {
    ours->emplace_back(std::move(k), std::move(v));
  };
  set("MASTER_ADDR", master);
  set("MASTER_PORT", port);
  set("WORLD_SIZE", std::to_string(NodeCount(spec) * ProcsPerNode(spec)));
  set("NODE_RANK", rank);
  set("NPROC_PER_NODE", nproc);
  set("PET_NNODES", nnodes);
  set("PET_NODE_RANK", rank);
  set("PET_NPROC_PER_NODE", nproc);
  set("PET_MASTER_ADDR", master);
  set("PET_MASTER_PORT", port);
  for (auto& kv : MpsEnvironment(spec)) {
    ours->push_back(std::move(kv));
  }
  if (!spec.credential.empty()) set("HACHI_JOB_TOKEN", spec.credential);
  if (!spec.user.empty()) {
    set("USER", spec.user);
    set("LOGNAME", spec.user);
    if (std::string home = HomeOf(spec.user); !home.empty()) set("HOME", home);
  }
}

// The job's own variables, then ours, which win: a name of ours or a managed prefix
// is dropped from the job's.
EnvList MergeEnvironment(const api::LaunchSpec& spec, EnvList ours) {
  std::set<std::string_view> overridden;
  for (const auto& kv : ours) overridden.insert(kv.first);
  EnvList env;
  env.reserve(spec.spec.env().size() + ours.size());
  for (const auto& [k, v] : spec.spec.env()) {
    if (k.empty() || k.find('=') != std::string::npos) continue;  // not expressible
    if (overridden.count(k) || IsManagedPrefix(k)) continue;
    auto same = std::find_if(env.begin(), env.end(),
                             [&k = k](const auto& kv) { return kv.first == k; });
    if (same != env.end()) {
      same->second = v;  // keeps the first position, so the order stays stable
    } else {
      env.emplace_back(k, v);
    }
  }
  for (auto& kv : ours) env.push_back(std::move(kv));
  return env;
}

}  // namespace

EnvList JobEnvironment(const api::LaunchSpec& spec) {
  EnvList ours;
  AddHachiVariables(spec, &ours);
  AddSlurmVariables(spec, &ours);
  AddLauncherVariables(spec, &ours);
  return MergeEnvironment(spec, std::move(ours));
}

EnvList MpsEnvironment(const api::LaunchSpec& spec) {
  EnvList env;
  if (spec.share_milli <= 0 || spec.gpus.empty()) return env;
  if (!spec.mps_pipe_dir.empty()) {
    env.emplace_back("CUDA_MPS_PIPE_DIRECTORY", spec.mps_pipe_dir);
    env.emplace_back("CUDA_MPS_LOG_DIRECTORY", spec.mps_log_dir);
  }
  env.emplace_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                   std::to_string((spec.share_milli + 9) / 10));
  if (spec.gpu_memory_mib > 0) {
    // The device ordinal as the client enumerates it: a share sees its one GPU as 0.
    env.emplace_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                     "0=" + std::to_string(spec.gpu_memory_mib) + "M");
  }
  return env;
}

}  // namespace hachi::agent

namespace hachi::agent {

GpuSet TaskGpus(const api::LaunchSpec& job, const api::StepLaunch& launch, int local) {
  if (launch.gpus_per_task <= 0) return job.gpus;
  const std::vector<int> all = job.gpus.Indices();
  GpuSet mine;
  const size_t first =
      static_cast<size_t>(local) * static_cast<size_t>(launch.gpus_per_task);
  for (size_t i = first; i < first + static_cast<size_t>(launch.gpus_per_task); ++i) {
    if (i >= all.size()) return GpuSet{};
    mine.Insert(all[i]);
  }
  return mine;
}

EnvList StepEnvironment(const api::LaunchSpec& job, const api::StepLaunch& launch,
                        int rank, int local) {
  // What differs between the job's nodes: the node's value always wins.
  static const std::set<std::string_view> kPerNode = {"CUDA_VISIBLE_DEVICES",
                                                      "NVIDIA_VISIBLE_DEVICES",
                                                      "HACHI_NODENAME",
                                                      "HACHI_GPUS",
                                                      "HACHI_NODE_RANK",
                                                      "SLURMD_NODENAME",
                                                      "SLURM_JOB_GPUS",
                                                      "SLURM_GPUS_ON_NODE",
                                                      "SLURM_CPUS_ON_NODE",
                                                      "NODE_RANK",
                                                      "PET_NODE_RANK",
                                                      "USER",
                                                      "LOGNAME",
                                                      "HOME"};
  EnvList ours;
  auto set = [&ours](std::string k, std::string v) {
    ours.emplace_back(std::move(k), std::move(v));
  };
  const std::string step = std::to_string(launch.step);
  const int nnodes = static_cast<int>(launch.nodes.size());
  const std::string tasks = std::to_string(launch.ntasks);
  const std::string hostlist = CompressHostList(launch.nodes);
  const std::string per_node = RepeatForm(launch.tasks_per_node);
  set("SLURM_STEP_ID", step);
  set("SLURM_STEPID", step);
  set("HACHI_STEP_ID", step);
  set("SLURM_PROCID", std::to_string(rank));
  set("SLURM_LOCALID", std::to_string(local));
  set("SLURM_NODEID", std::to_string(launch.node_index));
  set("SLURM_NTASKS", tasks);
  set("SLURM_NPROCS", tasks);
  set("SLURM_STEP_NUM_TASKS", tasks);
  set("SLURM_STEP_NUM_NODES", std::to_string(nnodes));
  set("SLURM_NNODES", std::to_string(nnodes));
  set("SLURM_STEP_NODELIST", hostlist);
  set("SLURM_NODELIST", hostlist);
  set("SLURM_STEP_TASKS_PER_NODE", per_node);
  set("SLURM_TASKS_PER_NODE", per_node);
  if (launch.cpus_per_task > 0) {
    set("SLURM_CPUS_PER_TASK", std::to_string(launch.cpus_per_task));
  }
  const GpuSet gpus = TaskGpus(job, launch, local);
  if (launch.gpus_per_task > 0) {
    set("SLURM_GPUS_PER_TASK", std::to_string(launch.gpus_per_task));
    set("CUDA_VISIBLE_DEVICES", gpus.ToList());
    set("NVIDIA_VISIBLE_DEVICES", gpus.empty() ? "void" : gpus.ToList());
  }
  set("SLURM_STEP_GPUS", gpus.ToList());

  std::set<std::string> named;
  for (const auto& kv : ours) named.insert(kv.first);
  const EnvList node = JobEnvironment(job);
  std::set<std::string> from_node;
  for (const auto& [k, v] : node) {
    if (!named.count(k) && kPerNode.count(k)) from_node.insert(k);
  }
  EnvList env;
  std::set<std::string> have;
  for (const auto& [k, v] : launch.env) {
    if (k.empty() || k.find('=') != std::string::npos) continue;
    if (named.count(k) || from_node.count(k)) continue;
    if (!have.insert(k).second) {
      std::find_if(env.begin(), env.end(), [&k = k](const auto& kv) {
        return kv.first == k;
      })->second = v;
      continue;
    }
    env.emplace_back(k, v);
  }
  for (const auto& [k, v] : node) {
    if (named.count(k)) continue;
    if (from_node.count(k) || have.insert(k).second) env.emplace_back(k, v);
  }
  for (auto& kv : ours) env.push_back(std::move(kv));
  return env;
}

}  // namespace hachi::agent
