#include "report/gpu_report.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

#include "report/json_get.h"

namespace hachi::report {
namespace {

constexpr double kMilliGpuSecondsPerHour = 1000.0 * 3600.0;

// Thousandths of a GPU that one allocation holds: a share its share, else its GPUs.
int64_t MilliGpus(const state::NodeAllocation& a) {
  return a.share_milli > 0 ? a.share_milli : int64_t{1000} * a.gpus.size();
}

bool Measured(const state::UsageSummary& u) { return u.samples > 0 && u.gpu_util >= 0; }

constexpr std::pair<ReportBy, std::string_view> kReportBy[] = {
    {ReportBy::kAccount, "account"},         {ReportBy::kUser, "user"},
    {ReportBy::kAccountUser, "accountuser"}, {ReportBy::kPartition, "partition"},
    {ReportBy::kNodeGroup, "nodegroup"},     {ReportBy::kPool, "pool"},
};

std::string GroupOf(ReportBy by, const state::JobRecord& j) {
  switch (by) {
    case ReportBy::kAccount:
      return j.req.account;
    case ReportBy::kUser:
      return j.req.user;
    case ReportBy::kAccountUser:
      return j.req.account + "/" + j.req.user;
    case ReportBy::kPartition:
      return j.req.partition;
    case ReportBy::kNodeGroup:
    case ReportBy::kPool:
      break;  // per allocation
  }
  return "";
}

ReportGroup Hours(std::string name, int jobs, int64_t alloc, int64_t measured,
                  double used, double cost) {
  ReportGroup g;
  g.cost = cost / kMilliGpuSecondsPerHour;
  g.name = std::move(name);
  g.jobs = jobs;
  g.gpu_hours = static_cast<double>(alloc) / kMilliGpuSecondsPerHour;
  g.measured_gpu_hours = static_cast<double>(measured) / kMilliGpuSecondsPerHour;
  g.used_gpu_hours = used / kMilliGpuSecondsPerHour;
  g.unmeasured_gpu_hours =
      static_cast<double>(alloc - measured) / kMilliGpuSecondsPerHour;
  return g;
}

}  // namespace

std::string_view ReportByName(ReportBy by) {
  for (const auto& [b, name] : kReportBy) {
    if (b == by) return name;
  }
  return "account";
}

bool ParseReportBy(std::string_view text, ReportBy* out) {
  for (const auto& [by, name] : kReportBy) {
    if (text == name) {
      *out = by;
      return true;
    }
  }
  return false;
}

double ReportGroup::Utilisation() const {
  return measured_gpu_hours > 0 ? 100.0 * used_gpu_hours / measured_gpu_hours : -1;
}

GpuReportBuilder::GpuReportBuilder(const ReportQuery& q, Time now,
                                   const std::map<std::string, std::string>* node_groups,
                                   const std::map<std::string, double>* node_prices)
    : q_(q), now_(now), node_groups_(node_groups), node_prices_(node_prices) {}

double GpuReportBuilder::PriceOf(const std::string& node) const {
  if (node_prices_ == nullptr) return 0;
  auto it = node_prices_->find(node);
  return it == node_prices_->end() ? 0 : it->second;
}

void GpuReportBuilder::AddTo(Acc* acc, int64_t alloc, bool measured, double util,
                             double cost) {
  ++acc->jobs;
  acc->alloc += alloc;
  acc->cost += cost;
  if (measured) {
    acc->measured += alloc;
    acc->used += static_cast<double>(alloc) * util / 100.0;
  }
}

void GpuReportBuilder::Add(const state::JobRecord& j, const state::UsageSummary& usage) {
  // A pending job holds nothing (a requeued one's earlier runs are not in its record).
  if (j.state == state::JobState::kPending || j.start_time <= 0 || j.allocations.empty())
    return;
  const Time end = j.state == state::JobState::kRunning ? now_ : j.end_time;
  const Time begin = std::max(j.start_time, q_.from);
  const Duration overlap = std::min(end, q_.to) - begin;
  if (overlap <= 0) return;

  const bool measured = Measured(usage);
  const double util = measured ? std::clamp(usage.gpu_util, 0.0, 100.0) : 0.0;
  int64_t alloc = 0;
  double cost = 0;  // milli-GPU-seconds x price
  if (q_.by == ReportBy::kNodeGroup || q_.by == ReportBy::kPool) {
    // The job's GPU time split over its nodes' groups by the GPUs it holds on each.
    std::map<std::string, std::pair<int64_t, double>> parts;
    for (const state::NodeAllocation& a : j.allocations) {
      const int64_t part = MilliGpus(a) * overlap;
      if (part <= 0) continue;
      std::string group;
      if (node_groups_ != nullptr) {
        if (auto it = node_groups_->find(a.node); it != node_groups_->end()) {
          group = it->second;
        }
      }
      const double priced = static_cast<double>(part) * PriceOf(a.node);
      parts[group].first += part;
      parts[group].second += priced;
      alloc += part;
      cost += priced;
    }
    for (const auto& [group, part] : parts) {
      AddTo(&groups_[group], part.first, measured, util, part.second);
    }
  } else {
    for (const state::NodeAllocation& a : j.allocations) {
      const int64_t part = MilliGpus(a) * overlap;
      alloc += part;
      cost += static_cast<double>(part) * PriceOf(a.node);
    }
    if (alloc > 0) AddTo(&groups_[GroupOf(q_.by, j)], alloc, measured, util, cost);
  }
  if (alloc <= 0) return;  // a job without GPUs
  AddTo(&total_, alloc, measured, util, cost);

  if (!measured || q_.top <= 0) return;
  ReportJob r;
  r.id = j.id;
  r.user = j.req.user;
  r.account = j.req.account;
  r.partition = j.req.partition;
  int64_t milli = 0;
  for (const state::NodeAllocation& a : j.allocations) milli += MilliGpus(a);
  r.gpus = static_cast<double>(milli) / 1000.0;
  r.gpu_hours = static_cast<double>(alloc) / kMilliGpuSecondsPerHour;
  r.used_gpu_hours = static_cast<double>(alloc) * util / 100.0 / kMilliGpuSecondsPerHour;
  r.idle_gpu_hours = r.gpu_hours - r.used_gpu_hours;
  r.gpu_util = util;
  jobs_.push_back(std::move(r));
}

GpuReport GpuReportBuilder::Finish() {
  GpuReport out;
  out.from = q_.from;
  out.to = q_.to;
  out.now = now_;
  out.by = q_.by;
  for (const auto& [name, acc] : groups_) {
    out.groups.push_back(
        Hours(name, acc.jobs, acc.alloc, acc.measured, acc.used, acc.cost));
  }
  std::stable_sort(out.groups.begin(), out.groups.end(),
                   [](const ReportGroup& a, const ReportGroup& b) {
                     return a.gpu_hours > b.gpu_hours;
                   });
  out.total = Hours("total", total_.jobs, total_.alloc, total_.measured, total_.used,
                    total_.cost);
  auto idler = [](const ReportJob& a, const ReportJob& b) {
    return a.idle_gpu_hours != b.idle_gpu_hours ? a.idle_gpu_hours > b.idle_gpu_hours
                                                : a.id < b.id;
  };
  const size_t n = std::min(jobs_.size(), static_cast<size_t>(std::max(0, q_.top)));
  std::partial_sort(jobs_.begin(), jobs_.begin() + static_cast<std::ptrdiff_t>(n),
                    jobs_.end(), idler);
  jobs_.resize(n);
  out.idlest = std::move(jobs_);
  jobs_.clear();
  return out;
}

GpuReport ComputeGpuReport(const std::vector<state::JobRecord>& jobs,
                           const ReportQuery& q, Time now,
                           const std::map<std::string, std::string>& node_groups,
                           const std::map<std::string, double>& node_prices) {
  GpuReportBuilder b(q, now, &node_groups, &node_prices);
  for (const state::JobRecord& j : jobs) b.Add(j, j.usage);
  return b.Finish();
}

// ---- JSON ----

namespace {

nlohmann::json GroupJson(const ReportGroup& g) {
  return {{"name", g.name},
          {"jobs", g.jobs},
          {"gpu_hours", g.gpu_hours},
          {"used_gpu_hours", g.used_gpu_hours},
          {"measured_gpu_hours", g.measured_gpu_hours},
          {"unmeasured_gpu_hours", g.unmeasured_gpu_hours},
          {"idle_gpu_hours", g.IdleGpuHours()},
          {"utilisation", g.Utilisation()},
          {"cost", g.cost}};
}

nlohmann::json JobJson(const ReportJob& r) {
  return {{"id", r.id},
          {"user", r.user},
          {"account", r.account},
          {"partition", r.partition},
          {"gpus", r.gpus},
          {"gpu_hours", r.gpu_hours},
          {"used_gpu_hours", r.used_gpu_hours},
          {"idle_gpu_hours", r.idle_gpu_hours},
          {"gpu_util", r.gpu_util}};
}

bool ReadGroup(const nlohmann::json& j, const std::string& path, ReportGroup* g,
               std::string* error) {
  if (!j.is_object()) {
    *error = path + ": not an object";
    return false;
  }
  return GetField(j, "name", path, &g->name, error) &&
         GetField(j, "jobs", path, &g->jobs, error) &&
         GetField(j, "gpu_hours", path, &g->gpu_hours, error) &&
         GetField(j, "used_gpu_hours", path, &g->used_gpu_hours, error) &&
         GetField(j, "measured_gpu_hours", path, &g->measured_gpu_hours, error) &&
         GetField(j, "unmeasured_gpu_hours", path, &g->unmeasured_gpu_hours, error) &&
         (!j.contains("cost") || GetField(j, "cost", path, &g->cost, error));
}

bool ReadJob(const nlohmann::json& j, const std::string& path, ReportJob* r,
             std::string* error) {
  if (!j.is_object()) {
    *error = path + ": not an object";
    return false;
  }
  return GetField(j, "id", path, &r->id, error) &&
         GetField(j, "user", path, &r->user, error) &&
         GetField(j, "account", path, &r->account, error) &&
         GetField(j, "partition", path, &r->partition, error) &&
         GetField(j, "gpus", path, &r->gpus, error) &&
         GetField(j, "gpu_hours", path, &r->gpu_hours, error) &&
         GetField(j, "used_gpu_hours", path, &r->used_gpu_hours, error) &&
         GetField(j, "idle_gpu_hours", path, &r->idle_gpu_hours, error) &&
         GetField(j, "gpu_util", path, &r->gpu_util, error);
}

}  // namespace

std::string GpuReportToJson(const GpuReport& r) {
  nlohmann::json groups = nlohmann::json::array();
  for (const ReportGroup& g : r.groups) groups.push_back(GroupJson(g));
  nlohmann::json idlest = nlohmann::json::array();
  for (const ReportJob& j : r.idlest) idlest.push_back(JobJson(j));
  return nlohmann::json{{"from", r.from},
                        {"to", r.to},
                        {"now", r.now},
                        {"by", ReportByName(r.by)},
                        {"groups", std::move(groups)},
                        {"total", GroupJson(r.total)},
                        {"idlest", std::move(idlest)}}
      .dump();
}

Result<GpuReport> GpuReportFromJson(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("report: not a JSON object");
  }
  GpuReport r;
  std::string error, by;
  const std::string root = "report";
  if (!GetField(j, "from", root, &r.from, &error) ||
      !GetField(j, "to", root, &r.to, &error) ||
      !GetField(j, "now", root, &r.now, &error) ||
      !GetField(j, "by", root, &by, &error)) {
    return InvalidArgument(error);
  }
  if (!ParseReportBy(by, &r.by)) {
    return InvalidArgument("report.by: unknown grouping '" + by + "'");
  }
  auto g = j.find("groups");
  if (g == j.end() || !g->is_array()) {
    return InvalidArgument("report.groups: missing or not an array");
  }
  for (size_t i = 0; i < g->size(); ++i) {
    ReportGroup group;
    if (!ReadGroup((*g)[i], "report.groups[" + std::to_string(i) + "]", &group, &error)) {
      return InvalidArgument(error);
    }
    r.groups.push_back(std::move(group));
  }
  auto t = j.find("total");
  if (t == j.end() || !ReadGroup(*t, "report.total", &r.total, &error)) {
    return InvalidArgument(error.empty() ? "report.total: missing" : error);
  }
  auto idle = j.find("idlest");
  if (idle == j.end() || !idle->is_array()) {
    return InvalidArgument("report.idlest: missing or not an array");
  }
  for (size_t i = 0; i < idle->size(); ++i) {
    ReportJob job;
    if (!ReadJob((*idle)[i], "report.idlest[" + std::to_string(i) + "]", &job, &error)) {
      return InvalidArgument(error);
    }
    r.idlest.push_back(std::move(job));
  }
  return r;
}

}  // namespace hachi::report
