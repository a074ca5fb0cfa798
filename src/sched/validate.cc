// ValidateRequest: the submit-time check (scheduler.h). Runs once per job, off the
// scheduling hot path, so it may build strings freely.
#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "core/strings.h"
#include "sched/eligibility.h"
#include "sched/features.h"
#include "sched/mig.h"
#include "sched/scheduler.h"

namespace hachi::sched {
namespace {

bool Allowed(const std::vector<std::string>& list, const std::string& name) {
  return list.empty() || std::find(list.begin(), list.end(), name) != list.end();
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

Status CheckAccess(const Partition& p, const JobRequest& req) {
  if (!Allowed(p.allowed_users, req.user)) {
    return InvalidArgument("user '" + req.user + "' may not use partition " + p.name +
                           " (allowed users: " + JoinNames(p.allowed_users) + ")");
  }
  if (!Allowed(p.allowed_accounts, req.account)) {
    return InvalidArgument("account '" + req.account + "' may not use partition " +
                           p.name +
                           " (allowed accounts: " + JoinNames(p.allowed_accounts) + ")");
  }
  return Status::Ok();
}

// The shape checks that need no cluster: numbers that can never make sense.
Status CheckShape(const JobRequest& req) {
  if (req.gpus < 0 || req.nodes < 1 || req.gpus_per_node < 0 || req.cpus < 0 ||
      req.cpus_per_gpu < 0 ||
      (req.memory_mib < 0 && req.memory_mib != kAllOfNodeMemory) ||
      req.memory_mib_per_gpu < 0 || req.min_gpu_memory_mib < 0 || req.time_limit < 0 ||
      req.gpu_share_milli < 0 || req.gpu_memory_mib < 0) {
    return InvalidArgument("negative number in the request (gpus " +
                           std::to_string(req.gpus) + ", nodes " +
                           std::to_string(req.nodes) + ")");
  }
  if (req.nodes > 1) {
    // gpus 0 and gpus per node 0: a job without GPUs on several nodes.
    if (req.gpus_per_node == 0 && req.gpus % req.nodes != 0) {
      return InvalidArgument(std::to_string(req.gpus) + " GPUs do not divide over " +
                             std::to_string(req.nodes) + " nodes");
    }
    if (req.gpus_per_node > 0 && req.gpus != 0 &&
        req.gpus != req.gpus_per_node * req.nodes) {
      return InvalidArgument("gpus " + std::to_string(req.gpus) + " is not nodes " +
                             std::to_string(req.nodes) + " x gpus per node " +
                             std::to_string(req.gpus_per_node));
    }
  }
  if (req.gpu_share_milli >= 1000) {
    return InvalidArgument("a GPU share is 1..999 thousandths of one GPU (got " +
                           std::to_string(req.gpu_share_milli) + ")");
  }
  if (req.Shared() && (req.gpus != 1 || req.nodes != 1 || req.gpus_per_node > 1)) {
    return InvalidArgument("a GPU share is a fraction of one GPU; it asks for " +
                           std::to_string(req.TotalGpus()) + " GPUs");
  }
  if (!req.Shared() && req.gpu_memory_mib > 0) {
    return InvalidArgument("GPU memory is promised to shared jobs only (use a share)");
  }
  // MIG devices (mig.h): N devices of one profile on one node.
  if (req.Mig()) {
    if (!LooksLikeMigProfile(req.mig_profile)) {
      return InvalidArgument("'" + req.mig_profile +
                             "' is not a MIG profile (like 1g.10gb or 3g.40gb)");
    }
    if (req.nodes != 1 || req.gpus_per_node > 0) {
      return InvalidArgument("MIG devices (" + req.mig_profile +
                             ") are for single-node jobs; it asks for " +
                             std::to_string(req.nodes) + " nodes");
    }
    if (req.gpus < 1) {
      return InvalidArgument("asks for " + std::to_string(req.gpus) + " " +
                             req.mig_profile + " MIG devices");
    }
    if (req.Shared()) {
      return InvalidArgument("a MIG device cannot be shared (--gpu-share)");
    }
    if (req.exclusive) {
      return InvalidArgument("MIG devices (" + req.mig_profile +
                             ") cannot be asked for with --exclusive (whole nodes)");
    }
  }
  return Status::Ok();
}

// Sharing must be allowed by the partition and makes no sense with whole nodes.
Status CheckSharing(const Partition& p, const JobRequest& req) {
  if (!req.Shared()) return Status::Ok();
  if (!p.allow_gpu_sharing || p.mode == PartitionMode::kWholeNode || req.exclusive) {
    return Unsatisfiable("partition " + p.name + " does not allow GPU sharing" +
                         (req.exclusive ? " for exclusive jobs" : ""));
  }
  return Status::Ok();
}

// -C, -w, -x (features.h). Keeps in `fitting` the nodes the selection
// allows; a selection no node of the partition can ever satisfy is refused with
// Slurm's words. `job_nodes`: the job's node count as far as it is known.
constexpr char kNotAvailable[] = "Requested node configuration is not available: ";

Status CheckSelection(const ClusterState& state, const Partition& part,
                      const JobRequest& req, const NodeSelection& sel, int job_nodes,
                      std::vector<int>* fitting) {
  std::vector<std::string> names;
  for (int n : sel.required) {
    if (std::find(part.nodes.begin(), part.nodes.end(), n) == part.nodes.end()) {
      return Unsatisfiable(kNotAvailable + std::string("node ") + state.nodes[n].name +
                           " (--nodelist) is not in partition " + part.name);
    }
    if (std::binary_search(sel.excluded.begin(), sel.excluded.end(), n)) {
      return Unsatisfiable(kNotAvailable + std::string("node ") + state.nodes[n].name +
                           " is both required (--nodelist) and excluded (--exclude)");
    }
    if (!NodeMatchesStatic(state.nodes[n], req) ||
        !sel.constraint.Matches(NodeFeatures(state.nodes[n]))) {
      return Unsatisfiable(kNotAvailable + std::string("node ") + state.nodes[n].name +
                           " (--nodelist) does not have what the job asks for" +
                           (sel.constraint.empty()
                                ? std::string()
                                : " (constraint '" + sel.constraint.text() + "')"));
    }
  }
  const size_t before = fitting->size();
  std::vector<int> kept;
  int excluded = 0;
  for (int n : *fitting) {
    if (std::binary_search(sel.excluded.begin(), sel.excluded.end(), n)) {
      ++excluded;
      continue;
    }
    if (SelectionAllows(state, sel, job_nodes, n)) kept.push_back(n);
  }
  if (kept.empty()) {
    std::string why;
    if (!sel.constraint.empty()) {
      why = "constraint '" + sel.constraint.text() + "' matches no node of partition " +
            part.name;
    } else {
      why = "no node of partition " + part.name + " is left";
    }
    if (excluded > 0) why += " (" + std::to_string(excluded) + " excluded)";
    if (before == 0) why = "no node of partition " + part.name + " suits the job";
    return Unsatisfiable(kNotAvailable + why);
  }
  *fitting = std::move(kept);
  return Status::Ok();
}

}  // namespace

namespace {

// The smallest `amount(node)` per GPU over the partition's nodes that have GPUs and say
// it; 0 when none does. A node full of jobs given this much per GPU is exactly full.
template <typename Amount>
int64_t SmallestPerGpu(const ClusterState& state, const Partition& part, Amount amount) {
  int64_t smallest = 0;
  for (int n : part.nodes) {
    const Node& node = state.nodes[n];
    const int64_t have = amount(node);
    if (node.gpu_count() <= 0 || have <= 0) continue;
    const int64_t share = have / node.gpu_count();
    if (share > 0 && (smallest <= 0 || share < smallest)) smallest = share;
  }
  return smallest;
}

}  // namespace

void ApplyDefaultMemory(const ClusterState& state, Job* job) {
  JobRequest& req = job->req;
  if (req.memory_mib > 0 || req.memory_mib_per_gpu > 0) return;
  const bool all_of_node = req.memory_mib == kAllOfNodeMemory;
  if (all_of_node) req.memory_mib = 0;
  if (job->partition < 0 || job->partition >= static_cast<int>(state.partitions.size()))
    return;
  const Partition& part = state.partitions[job->partition];
  if (all_of_node) {
    // --mem=0: the memory of the smallest of the partition's nodes, so that the job
    // fits every one of them and has a whole one's where they are alike.
    for (int n : part.nodes) {
      const int64_t m = state.nodes[n].memory_mib;
      if (m > 0 && (req.memory_mib == 0 || m < req.memory_mib)) req.memory_mib = m;
    }
    if (req.memory_mib > 0) return;
  }
  int64_t per_gpu = part.default_mem_per_gpu_mib;
  if (per_gpu <= 0) {
    per_gpu = SmallestPerGpu(state, part, [](const Node& n) { return n.memory_mib; });
  }
  if (per_gpu <= 0) return;
  if (req.TotalGpus() == 0) {
    req.memory_mib = per_gpu;  // a job without GPUs: one GPU's worth
  } else if (req.Mig()) {
    // Each MIG device: its part of its GPU's memory times one GPU's worth (a 1g.10gb
    // of an 80 GB GPU: an eighth), so seven devices do not take seven GPUs' worth.
    double fraction = 1.0 / 7;
    for (int n : part.nodes) {
      const Node& node = state.nodes[n];
      auto m = std::find_if(node.mig.begin(), node.mig.end(), [&](const MigSlot& s) {
        return s.profile == req.mig_profile;
      });
      if (m != node.mig.end() && node.gpu_memory_mib > 0) {
        fraction = std::min(1.0, static_cast<double>(m->memory_mib) /
                                     static_cast<double>(node.gpu_memory_mib));
        break;
      }
    }
    req.memory_mib =
        std::max<int64_t>(1, static_cast<int64_t>(per_gpu * fraction) * req.gpus);
  } else if (req.Shared()) {
    req.memory_mib = std::max<int64_t>(1, per_gpu * req.gpu_share_milli / 1000);
  } else {
    req.memory_mib_per_gpu = per_gpu;
  }
}

void ApplyDefaultCpus(const ClusterState& state, Job* job) {
  JobRequest& req = job->req;
  if (req.cpus > 0 || req.cpus_per_gpu > 0 || req.TotalGpus() == 0) return;
  if (job->partition < 0 || job->partition >= static_cast<int>(state.partitions.size()))
    return;
  const Partition& part = state.partitions[job->partition];
  int per_gpu = part.default_cpus_per_gpu;
  if (per_gpu <= 0) {
    per_gpu = static_cast<int>(
        SmallestPerGpu(state, part, [](const Node& n) { return int64_t{n.cpus}; }));
  }
  if (per_gpu <= 0) return;
  if (req.Mig()) {
    // A MIG device: at least one CPU, a seventh of a GPU's worth on a full GPU.
    req.cpus = std::max(1, per_gpu / 7) * req.gpus;
  } else if (req.Shared()) {
    req.cpus = std::max(1, per_gpu * req.gpu_share_milli / 1000);
  } else {
    req.cpus_per_gpu = per_gpu;
  }
}

namespace {

// What the checks of a submit share: the cluster, the job as the checks so far made it
// (defaults filled, whole nodes rounded), and what earlier checks found out.
struct Validation {
  explicit Validation(const ClusterState& s) : state(s) {}
  const ClusterState& state;
  Job job;
  const Partition* part = nullptr;
  std::vector<int> fitting;  // nodes of the partition that could ever hold a share
  NodeSelection sel;         // -C, -w, -x resolved
  int largest = 0;           // whole GPUs of the largest fitting node
  std::string largest_name;
  bool accepted = false;  // a check found the job a home: the later ones do not apply
};

// GPUs in MIG mode are never given whole (mig.h): they do not count as a node's GPUs.
int WholeGpus(const Node& node) {
  return node.gpu_count() - (node.mig_gpus & GpuSet::FirstN(node.gpu_count())).size();
}

Status CheckRequestShape(Validation* v) { return CheckShape(v->job.req); }

// A gang's GPUs as count per node and total, whichever the request gave.
Status NormalizeGang(Validation* v) {
  JobRequest& req = v->job.req;
  if (req.nodes > 1 && req.gpus_per_node == 0) req.gpus_per_node = req.gpus / req.nodes;
  if (req.nodes > 1) req.gpus = req.gpus_per_node * req.nodes;
  return Status::Ok();
}

// Partition: named, or the first one the user and account may use; then who may use
// it and whether it shares GPUs.
Status ChoosePartition(Validation* v) {
  const ClusterState& state = v->state;
  JobRequest& req = v->job.req;
  if (req.partition.empty()) {
    for (const Partition& p : state.partitions) {
      if (CheckAccess(p, req).ok()) {
        req.partition = p.name;
        break;
      }
    }
    if (req.partition.empty()) {
      return InvalidArgument("user '" + req.user + "' (account '" + req.account +
                             "') may use no partition");
    }
  }
  v->job.partition = state.PartitionIndex(req.partition);
  if (v->job.partition < 0) {
    std::vector<std::string> names;
    for (const Partition& p : state.partitions) names.push_back(p.name);
    return NotFound("no partition '" + req.partition +
                    "' (partitions: " + JoinNames(names) + ")");
  }
  v->part = &state.partitions[v->job.partition];
  HACHI_RETURN_IF_ERROR(CheckAccess(*v->part, req));
  HACHI_RETURN_IF_ERROR(CheckSharing(*v->part, req));
  // Promised memory must fit one GPU: the nodes whose GPUs are smaller are ineligible.
  req.min_gpu_memory_mib = std::max(req.min_gpu_memory_mib, req.gpu_memory_mib);
  return Status::Ok();
}

Status CheckQos(Validation* v) {
  const std::string& qos = v->job.req.qos;
  if (!qos.empty() && std::none_of(v->state.qos.begin(), v->state.qos.end(),
                                   [&](const Qos& q) { return q.name == qos; })) {
    return NotFound("no QoS '" + qos + "'");
  }
  return Status::Ok();
}

Status CheckTimeLimit(Validation* v) {
  JobRequest& req = v->job.req;
  const Partition& part = *v->part;
  if (req.time_limit == 0) req.time_limit = part.default_time;
  if (req.time_limit > part.max_time) {
    return Unsatisfiable("time limit " + FormatDuration(req.time_limit) +
                         " exceeds partition " + part.name + "'s maximum " +
                         FormatDuration(part.max_time));
  }
  return Status::Ok();
}

// Partition GPU bounds apply to what the user asked for. A job without GPUs runs only
// where the partition takes such jobs, with at least 1 CPU.
Status CheckPartitionBounds(Validation* v) {
  JobRequest& req = v->job.req;
  const Partition& part = *v->part;
  const int asked = req.TotalGpus();
  if (asked == 0 && !part.AcceptsCpuJobs()) {
    return Unsatisfiable("a job without GPUs cannot run in partition " + part.name +
                         ": it takes no CPU-only jobs (its config needs allow_cpu_jobs "
                         "= true, or min_gpus = 0; or ask for a GPU, --gres=gpu:1)");
  }
  if (asked == 0 && NodeCpus(req) == 0) req.cpus = 1;
  if (asked > 0 && asked < part.min_gpus) {
    return Unsatisfiable("asks for " + std::to_string(asked) + " GPUs; partition " +
                         part.name + " takes jobs of at least " +
                         std::to_string(part.min_gpus));
  }
  if (part.max_gpus > 0 && asked > part.max_gpus) {
    return Unsatisfiable("asks for " + std::to_string(asked) + " GPUs; partition " +
                         part.name + " takes jobs of at most " +
                         std::to_string(part.max_gpus));
  }
  if (part.nodes.empty()) {
    return Unsatisfiable("partition " + part.name + " has no nodes");
  }
  if (req.Mig() && part.mode == PartitionMode::kWholeNode) {
    return Unsatisfiable("partition " + part.name + " gives whole nodes; MIG devices (" +
                         req.mig_profile + ") are not given there");
  }
  return Status::Ok();
}

// Nodes that could ever hold one share of the job, ignoring the GPU count: the static
// match, then -C, -w, -x, then (whole-node jobs) no node with GPUs in MIG mode.
Status FindFittingNodes(Validation* v) {
  const ClusterState& state = v->state;
  const JobRequest& req = v->job.req;
  const Partition& part = *v->part;
  std::vector<int>& fitting = v->fitting;
  for (int n : part.nodes) {
    if (NodeMatchesStatic(state.nodes[n], req)) fitting.push_back(n);
  }
  Result<NodeSelection> sel = ResolveSelection(state, req);
  if (!sel.ok()) return sel.status();
  v->sel = std::move(*sel);
  if (!v->sel.empty() && !fitting.empty()) {
    const int job_nodes = std::max(req.nodes, static_cast<int>(v->sel.required.size()));
    HACHI_RETURN_IF_ERROR(CheckSelection(state, part, req, v->sel, job_nodes, &fitting));
  }
  // A whole-node job takes every GPU whole: never a node with GPUs in MIG mode (mig.h).
  if (IsWholeNode(part, req) && req.TotalGpus() > 0 && !fitting.empty()) {
    std::vector<int> kept;
    for (int n : fitting) {
      if (state.nodes[n].mig_gpus.empty()) kept.push_back(n);
    }
    if (kept.empty()) {
      return Unsatisfiable("every node of partition " + part.name +
                           " that suits the job has GPUs in MIG mode; a whole-node job "
                           "takes every GPU whole");
    }
    fitting = std::move(kept);
  }
  if (fitting.empty()) {
    std::string what = req.gpu_model.empty() ? "" : "GPU model " + req.gpu_model;
    if (req.min_gpu_memory_mib > 0) {
      if (!what.empty()) what += " with ";
      what += std::to_string(req.min_gpu_memory_mib) + " MiB of GPU memory";
    }
    if (what.empty()) what = "room for the job's CPUs and memory";
    return Unsatisfiable("no node of partition " + part.name + " has " + what);
  }
  return Status::Ok();
}

// MIG devices: some node must have that many of the profile (its layout is the one its
// agent found; Hachi never changes it), and room for the job's CPUs and memory beside
// them. Such a job is then accepted: the whole-GPU checks below are not its.
Status CheckMigDevices(Validation* v) {
  const JobRequest& req = v->job.req;
  if (!req.Mig()) return Status::Ok();
  const ClusterState& state = v->state;
  const Partition& part = *v->part;
  int most = 0;
  std::string most_name;
  for (int n : v->fitting) {
    const int k = CountMigSlots(state.nodes[n], req.mig_profile);
    if (k > most) {
      most = k;
      most_name = state.nodes[n].name;
    }
  }
  if (most == 0) {
    return Unsatisfiable(
        "no node of partition " + part.name + " has " + req.mig_profile +
        " MIG devices (MIG profiles there: " + MigProfilesText(state, v->fitting) + ")");
  }
  if (most < req.gpus) {
    return Unsatisfiable("asks for " + std::to_string(req.gpus) + " " + req.mig_profile +
                         " MIG devices on one node; the most in "
                         "partition " +
                         part.name + " is " + std::to_string(most) + " (" + most_name +
                         ")");
  }
  for (int n : v->fitting) {
    const Node& node = state.nodes[n];
    if (CountMigSlots(node, req.mig_profile) >= req.gpus && node.cpus >= NodeCpus(req) &&
        node.memory_mib >= NodeMemory(req)) {
      v->accepted = true;
      return Status::Ok();
    }
  }
  return Unsatisfiable("needs " + std::to_string(NodeCpus(req)) + " CPUs and " +
                       std::to_string(NodeMemory(req)) + " MiB with " +
                       std::to_string(req.gpus) + " " + req.mig_profile +
                       " MIG devices; no node of partition " + part.name +
                       " has that much");
}

// The largest fitting node; whole nodes: round up to whole nodes of that size, the job
// then owns every GPU of each node (docs/scheduler.md).
Status RoundToWholeNodes(Validation* v) {
  for (int n : v->fitting) {
    if (WholeGpus(v->state.nodes[n]) > v->largest) {
      v->largest = WholeGpus(v->state.nodes[n]);
      v->largest_name = v->state.nodes[n].name;
    }
  }
  JobRequest& req = v->job.req;
  if (IsWholeNode(*v->part, req)) {
    const int total = req.TotalGpus();
    // An exclusive job without GPUs keeps its node count and takes their GPUs too.
    if (total > 0) req.nodes = (total + v->largest - 1) / v->largest;
    req.gpus_per_node = req.nodes > 1 ? v->largest : 0;
    req.gpus = req.nodes * v->largest;
  }
  return Status::Ok();
}

Status CheckNodeListSize(Validation* v) {
  const size_t named = v->sel.required.size();
  const int nodes = v->job.req.nodes;
  if (static_cast<int>(named) > nodes) {
    return InvalidArgument("--nodelist names " + std::to_string(named) +
                           " nodes; the job asks for " + std::to_string(nodes) +
                           " (ask for them all with -N " + std::to_string(named) + ")");
  }
  return Status::Ok();
}

Status CheckGpusPerNode(Validation* v) {
  const int gpn = v->job.req.GpusPerNode();
  if (gpn > v->largest) {
    return Unsatisfiable("asks for " + std::to_string(gpn) +
                         " GPUs on one node; the largest node in partition " +
                         v->part->name + " has " + std::to_string(v->largest) + " (" +
                         v->largest_name + ")");
  }
  return Status::Ok();
}

// CPUs and memory per node must fit some node that has the GPUs per node; a gang needs
// that many such nodes, alike in interconnect and GPU model.
Status CheckNodesFit(Validation* v) {
  const JobRequest& req = v->job.req;
  const Partition& part = *v->part;
  const int gpn = req.GpusPerNode();
  int cpu_fit = 0;
  std::map<std::pair<int, std::string>, int> per_class;  // (interconnect, model)
  for (int n : v->fitting) {
    const Node& node = v->state.nodes[n];
    if (WholeGpus(node) < gpn) continue;
    if (node.cpus < NodeCpus(req) || node.memory_mib < NodeMemory(req)) continue;
    ++cpu_fit;
    ++per_class[{static_cast<int>(node.interconnect), node.gpu_model}];
  }
  if (cpu_fit == 0) {
    return Unsatisfiable("needs " + std::to_string(NodeCpus(req)) + " CPUs and " +
                         std::to_string(NodeMemory(req)) + " MiB per node with " +
                         std::to_string(gpn) + " GPUs; no node of partition " +
                         part.name + " has that much");
  }
  if (req.nodes > static_cast<int>(part.nodes.size())) {
    return Unsatisfiable("asks for " + std::to_string(req.nodes) + " nodes; partition " +
                         part.name + " has " + std::to_string(part.nodes.size()));
  }
  if (req.nodes > cpu_fit) {
    return Unsatisfiable("asks for " + std::to_string(req.nodes) + " nodes with " +
                         std::to_string(gpn) + " GPUs each; partition " + part.name +
                         " has " + std::to_string(cpu_fit) + " such nodes");
  }
  if (req.nodes > 1) {
    int best = 0;
    for (const auto& [key, count] : per_class) best = std::max(best, count);
    if (best < req.nodes) {
      return Unsatisfiable("asks for " + std::to_string(req.nodes) +
                           " nodes of one interconnect class and GPU model; partition " +
                           part.name + " has at most " + std::to_string(best) + " alike");
    }
  }
  return Status::Ok();
}

// The checks of a submit against the cluster, in order; each may fill a default the
// later ones read, and the first error is the answer.
struct ValidationCheck {
  const char* name;
  Status (*check)(Validation*);
};
constexpr ValidationCheck kValidationChecks[] = {
    // Numbers that can never make sense, before any of them is used.
    {"shape", CheckRequestShape},
    {"gang", NormalizeGang},
    // The partition first: every later bound is the partition's.
    {"partition", ChoosePartition},
    {"qos", CheckQos},
    {"time limit", CheckTimeLimit},
    {"partition bounds", CheckPartitionBounds},
    // Then the nodes: which could ever hold the job, and whether enough of them do.
    {"fitting nodes", FindFittingNodes},
    {"MIG devices", CheckMigDevices},  // accepts a MIG job: the rest is whole GPUs
    {"whole nodes", RoundToWholeNodes},
    // After rounding: -w's count against the node count the job ends up with.
    {"node list", CheckNodeListSize},
    {"GPUs per node", CheckGpusPerNode},
    {"CPUs and memory", CheckNodesFit},
};

}  // namespace

Result<Job> ValidateRequest(const ClusterState& state, const JobRequest& in) {
  Validation v(state);
  v.job.req = in;
  for (const ValidationCheck& c : kValidationChecks) {
    HACHI_RETURN_IF_ERROR(c.check(&v));
    if (v.accepted) break;
  }
  return std::move(v.job);
}

}  // namespace hachi::sched
