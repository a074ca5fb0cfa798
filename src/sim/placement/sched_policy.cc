#include "sim/placement/sched_policy.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

#include "alloc/node_model.h"
#include "sched/apply.h"
#include "sched/scheduler.h"
#include "topo/analysis.h"
#include "topo/topology.h"

namespace hachi::placement {
namespace {

constexpr Duration kLimit = kHour;  // any: nothing ends in the protocol

// openb lists no links: every pair through the host bridge, one NUMA node.
Result<std::shared_ptr<const alloc::NodeModel>> GenericModel(
    int gpus, topo::InterconnectClass* cls) {
  topo::Topology t(gpus);
  t.set_source("openb node (no link data): PHB between every pair");
  for (int a = 0; a < gpus; ++a) {
    t.mutable_gpu(a).numa_node = 0;
    for (int b = a + 1; b < gpus; ++b) {
      t.SetSymmetricLink(a, b, topo::Link{0, topo::PciePath::kPhb});
    }
  }
  Result<alloc::NodeModel> m = alloc::NodeModel::Compile(t);
  if (!m.ok()) return m.status();
  *cls = topo::Analyze(t).interconnect;
  return std::make_shared<const alloc::NodeModel>(std::move(*m));
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// sched matches GPU models as substrings (eligibility.h); the protocol matches names
// exactly. The two agree unless one model name contains another.
Status CheckModelNames(const Cluster& cluster) {
  for (const std::string& a : cluster.models) {
    for (const std::string& b : cluster.models) {
      if (a != b && Lower(b).find(Lower(a)) != std::string::npos) {
        return InvalidArgument("GPU model '" + a + "' is part of '" + b +
                               "': the scheduler's model match would confuse them");
      }
    }
  }
  return Status::Ok();
}

Result<sched::ClusterState> BuildState(const Cluster& cluster,
                                       const std::vector<int>& order) {
  sched::ClusterState s;
  sched::Partition part;
  part.name = "openb";
  part.allow_gpu_sharing = true;
  std::map<int,
           std::pair<std::shared_ptr<const alloc::NodeModel>, topo::InterconnectClass>>
      models;
  for (int index : order) {
    const OpenbNode& o = cluster.nodes[index];
    auto it = models.find(o.gpus);
    if (it == models.end()) {
      topo::InterconnectClass cls{};
      Result<std::shared_ptr<const alloc::NodeModel>> m = GenericModel(o.gpus, &cls);
      if (!m.ok()) return m.status();
      it = models.emplace(o.gpus, std::make_pair(*m, cls)).first;
    }
    sched::Node n;
    n.name = o.sn;
    n.model = it->second.first;
    n.interconnect = it->second.second;
    n.gpu_model = cluster.models[o.model];
    n.cpus = static_cast<int>(o.cpu_milli);
    n.memory_mib = o.memory_mib;
    n.partitions = {0};
    n.free_gpus = n.model->all_gpus();
    n.free_cpus = n.cpus;
    n.free_memory_mib = n.memory_mib;
    part.nodes.push_back(static_cast<int>(s.nodes.size()));
    s.nodes.push_back(std::move(n));
  }
  s.partitions.push_back(std::move(part));
  // Equal priority for every job: the queue is the submit order (then id).
  s.weights.size = 0;
  return s;
}

// A model set as the scheduler reads it: "G2|T4"; empty: any. A set of models that no
// node has becomes a name no node has.
std::string ModelsOf(const Cluster& cluster, uint32_t mask) {
  if (mask == 0) return "";
  std::string out;
  for (size_t k = 0; k < cluster.models.size(); ++k) {
    if (!(mask >> k & 1u)) continue;
    if (!out.empty()) out += '|';
    out += cluster.models[k];
  }
  return out.empty() ? "(no openb node has this model)" : out;
}

sched::Job MakeJob(const Cluster& cluster, const OpenbPod& p, int event) {
  sched::Job j;
  j.id = event + 1;
  j.partition = 0;
  sched::JobRequest& r = j.req;
  r.partition = "openb";
  r.user = r.account = "openb";
  r.time_limit = kLimit;
  r.cpus = static_cast<int>(p.cpu_milli);
  r.memory_mib = p.memory_mib;
  r.gpus = p.num_gpu;  // 0: a CPU-only pod (the placement phase handles it)
  if (p.is_share()) r.gpu_share_milli = p.gpu_milli;
  // The protocol checks the model only for pods that take GPUs (§3.2).
  if (p.num_gpu > 0) r.gpu_model = ModelsOf(cluster, p.spec_mask);
  return j;
}

std::vector<sched::WorkloadClass> Workload(const Cluster& cluster,
                                           const std::vector<TypicalTask>& tasks) {
  std::vector<sched::WorkloadClass> w;
  for (const TypicalTask& t : tasks) {
    sched::WorkloadClass c;
    const bool share = t.num_gpu == 1 && t.gpu_milli > 0 && t.gpu_milli < kMilliPerGpu;
    c.gpus = t.gpu_milli > 0 ? t.num_gpu : 0;
    c.share_milli = share ? t.gpu_milli : 0;
    c.cpus = static_cast<int>(t.cpu_milli);
    c.memory_mib = 0;  // FGD's measure ignores memory
    c.gpu_model = ModelsOf(cluster, t.spec_mask);
    c.weight = t.freq;
    w.push_back(std::move(c));
  }
  return w;
}

}  // namespace

Result<std::vector<Placement>> PlaceWithScheduler(const Cluster& cluster,
                                                  const std::vector<OpenbPod>& pods,
                                                  const std::vector<int>& events,
                                                  const std::vector<int>& order,
                                                  const std::vector<TypicalTask>& tasks) {
  HACHI_RETURN_IF_ERROR(CheckModelNames(cluster));
  Result<sched::ClusterState> built = BuildState(cluster, order);
  if (!built.ok()) return built.status();
  sched::ClusterState& state = *built;
  state.workload = Workload(cluster, tasks);
  state.pending.reserve(events.size());
  for (size_t e = 0; e < events.size(); ++e) {
    state.pending.push_back(MakeJob(cluster, pods[events[e]], static_cast<int>(e)));
  }
  sched::SchedConfig config;
  config.policy = "hachi";
  config.backfill_depth = 0;  // no departures: a reservation would never be honoured
  config.backfill_max_jobs = static_cast<int>(events.size());
  config.explain = false;
  Result<std::unique_ptr<sched::Scheduler>> scheduler = sched::Scheduler::Create(config);
  if (!scheduler.ok()) return scheduler.status();
  const sched::Plan plan = (*scheduler)->Schedule(state, 0);

  // Each start through the applier the server and the simulator use (sched/apply.h),
  // which refuses an overcommit or any start the scheduler should not have made.
  sched::PlanApplier applier(&state);
  std::vector<Placement> out(events.size());
  for (const sched::Start& st : plan.starts) {
    const size_t e = static_cast<size_t>(st.job - 1);
    if (e >= events.size() || st.allocations.size() != 1 || out[e].node >= 0) {
      return Internal("the plan starts job " + std::to_string(st.job) + " wrongly");
    }
    HACHI_RETURN_IF_ERROR(applier.Apply(state.pending[e], st));
    const sched::Allocation& a = st.allocations[0];
    out[e].node = order[a.node];
    for (int g : a.gpus.Indices()) out[e].gpus.push_back(g);
  }
  return out;
}

}  // namespace hachi::placement
