#include "report/stats_cause.h"

#include <cstdio>
#include <unordered_map>
#include <utility>

namespace hachi::report {
namespace {

std::string Plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string OneDecimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

void AddPending(std::vector<PartitionLoad>* loads,
                const std::vector<PendingJob>& pending) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < loads->size(); ++i) index[(*loads)[i].partition] = i;
  // Per partition, per user: jobs and GPUs.
  std::vector<std::map<std::string, std::pair<int, int>>> users(loads->size());
  for (const PendingJob& j : pending) {
    auto it = index.find(j.partition);
    if (it == index.end()) continue;
    PartitionLoad& l = (*loads)[it->second];
    ++l.pending_jobs;
    l.pending_gpus += j.gpus;
    l.pending_gpu_hours += static_cast<double>(j.gpus) * j.time_limit / 3600.0;
    if (j.reason == sched::Reason::kUserQuota ||
        j.reason == sched::Reason::kAccountQuota) {
      ++l.quota_jobs;
    }
    if (j.reason == sched::Reason::kFragmented) {
      ++l.fragmented_jobs;
      if (l.needed_gpus == 0 || j.gpus_per_node < l.needed_gpus)
        l.needed_gpus = j.gpus_per_node;
    }
    ++l.reasons[j.reason == sched::Reason::kNone
                    ? "None"
                    : std::string(sched::ReasonName(j.reason))];
    auto& u = users[it->second][j.user];
    ++u.first;
    u.second += j.gpus;
  }
  for (size_t i = 0; i < loads->size(); ++i) {
    PartitionLoad& l = (*loads)[i];
    for (const auto& [user, n] : users[i]) {  // by name: ties go to the first
      if (n.first > l.top_user_jobs ||
          (n.first == l.top_user_jobs && n.second > l.top_user_gpus)) {
        l.top_user = user;
        l.top_user_jobs = n.first;
        l.top_user_gpus = n.second;
      }
    }
  }
}

std::vector<AlertCause> ClassifyAlert(const PartitionLoad& l) {
  std::vector<AlertCause> out;
  const int pending = l.pending_jobs;
  if (pending > 0 && 2 * l.quota_jobs > pending) {
    out.push_back({"quota", std::to_string(l.quota_jobs) + " of " +
                                std::to_string(pending) +
                                " pending jobs wait for a user or account GPU quota"});
  }
  if (pending > 0 && 2 * l.fragmented_jobs > pending) {
    out.push_back(
        {"fragmentation",
         std::to_string(l.fragmented_jobs) + " of " + std::to_string(pending) +
             " pending jobs fit the partition's " +
             Plural(l.free_gpus, "free GPU", "free GPUs") +
             " in all but no node has enough of them together (largest free set " +
             std::to_string(l.largest_free) +
             (l.largest_free_node.empty() ? "" : " on " + l.largest_free_node) + " < " +
             std::to_string(l.needed_gpus) + " needed)"});
  }
  if (pending >= 2 && !l.top_user.empty() &&
      (2 * l.top_user_jobs > pending ||
       (l.pending_gpus > 0 && 2 * l.top_user_gpus > l.pending_gpus))) {
    out.push_back({"user_burst", "user " + l.top_user + " has " +
                                     std::to_string(l.top_user_jobs) + " of " +
                                     std::to_string(pending) + " pending jobs (" +
                                     std::to_string(l.top_user_gpus) + " of " +
                                     std::to_string(l.pending_gpus) + " pending GPUs)"});
  }
  if (pending > 0 && l.allocated_gpus + l.pending_gpus > l.gpus) {
    std::string text = std::to_string(l.allocated_gpus) + " GPUs in use + " +
                       std::to_string(l.pending_gpus) + " pending > " +
                       std::to_string(l.gpus) + " in service on " +
                       std::to_string(l.nodes_up) + " of " +
                       Plural(l.nodes, "node", "nodes") + " up";
    if (l.gpus > 0) {
      text += " (pending work " + OneDecimal(l.pending_gpu_hours) + " GPU-hours, " +
              OneDecimal(l.pending_gpu_hours / l.gpus) + " h of the whole partition)";
    }
    out.push_back({"too_few_nodes", std::move(text)});
  }
  if (out.empty()) {
    std::string reasons;
    for (const auto& [word, n] : l.reasons) {
      reasons += (reasons.empty() ? "" : ", ") + std::to_string(n) + " " + word;
    }
    out.push_back(
        {"unknown", "no single cause: " + Plural(pending, "pending job", "pending jobs") +
                        (reasons.empty() ? "" : " (" + reasons + ")")});
  }
  return out;
}

}  // namespace hachi::report
