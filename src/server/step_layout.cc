#include "server/step_layout.h"

#include <algorithm>

namespace hachi::server {

Result<StepLayout> LayOutStep(const state::JobRecord& job, const api::StepRequest& req) {
  const state::JobId id = job.id;
  // The nodes: the job's, in rank order (-w: those of them named).
  std::vector<const state::NodeAllocation*> avail;
  for (const state::NodeAllocation& a : job.allocations) {
    if (req.node_list.empty() || std::find(req.node_list.begin(), req.node_list.end(),
                                           a.node) != req.node_list.end()) {
      avail.push_back(&a);
    }
  }
  for (const std::string& n : req.node_list) {
    if (std::none_of(job.allocations.begin(), job.allocations.end(),
                     [&](const state::NodeAllocation& a) { return a.node == n; })) {
      return InvalidArgument("-w " + n + ": not a node of job " + std::to_string(id));
    }
  }
  const int have = static_cast<int>(avail.size());
  if (req.nodes > have) {
    return InvalidArgument("the step asks for " + std::to_string(req.nodes) +
                           " nodes (-N); job " + std::to_string(id) + " has " +
                           std::to_string(have));
  }
  int nodes = req.nodes > 0 ? req.nodes : have;
  int ntasks = req.ntasks;
  if (ntasks <= 0) {
    ntasks = req.ntasks_per_node > 0 ? req.ntasks_per_node * nodes : nodes;
  }
  if (req.ntasks_per_node > 0 && req.nodes <= 0) {
    // -n with --ntasks-per-node and no -N: as few nodes as hold them.
    nodes = std::min(have, (ntasks + req.ntasks_per_node - 1) / req.ntasks_per_node);
  }
  nodes = std::min(nodes, ntasks);  // Slurm: "can't run 1 processes on 2 nodes"
  if (req.ntasks_per_node > 0 && ntasks > req.ntasks_per_node * nodes) {
    return InvalidArgument(
        std::to_string(ntasks) + " tasks do not fit on " + std::to_string(nodes) +
        " node(s) at --ntasks-per-node=" + std::to_string(req.ntasks_per_node));
  }
  if (req.pty && ntasks != 1) {
    return InvalidArgument("--pty runs one task; the step asks for " +
                           std::to_string(ntasks));
  }
  StepLayout out;
  out.ntasks = ntasks;
  // Block distribution: consecutive ranks per node, the first nodes one more.
  out.per_node.assign(static_cast<size_t>(nodes), 0);
  if (req.ntasks_per_node > 0) {
    int left = ntasks;
    for (int& c : out.per_node) {
      c = std::min(left, req.ntasks_per_node);
      left -= c;
    }
  } else {
    for (int i = 0; i < nodes; ++i) {
      out.per_node[static_cast<size_t>(i)] =
          ntasks / nodes + (i < ntasks % nodes ? 1 : 0);
    }
  }
  for (int i = 0; i < nodes; ++i) {
    const state::NodeAllocation& a = *avail[static_cast<size_t>(i)];
    const int tasks = out.per_node[static_cast<size_t>(i)];
    if (req.gpus_per_task > 0 && tasks * req.gpus_per_task > a.gpus.size()) {
      return InvalidArgument(std::to_string(tasks) + " task(s) x --gpus-per-task=" +
                             std::to_string(req.gpus_per_task) + " on " + a.node +
                             ": job " + std::to_string(id) + " has " +
                             std::to_string(a.gpus.size()) + " GPU(s) there");
    }
    if (req.cpus_per_task > 0 && a.cpus > 0 && tasks * req.cpus_per_task > a.cpus) {
      return InvalidArgument(std::to_string(tasks) + " task(s) x --cpus-per-task=" +
                             std::to_string(req.cpus_per_task) + " on " + a.node +
                             ": job " + std::to_string(id) + " has " +
                             std::to_string(a.cpus) + " CPU(s) there");
    }
    out.nodes.push_back(a.node);
    out.cpus +=
        req.cpus_per_task > 0 ? tasks * req.cpus_per_task : std::max(a.cpus, tasks);
    out.gpus += req.gpus_per_task > 0 ? tasks * req.gpus_per_task : a.gpus.size();
  }
  return out;
}

}  // namespace hachi::server
