#include "report/priority_report.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "report/json_get.h"

namespace hachi::report {
namespace {

using nlohmann::json;

Status Problem(const std::string& error) { return InvalidArgument("priority: " + error); }

// Reads array `key` of `j`, each element with `read`; false (and *error) on the first
// problem.
template <typename T, typename Read>
bool ReadArray(const json& j, const char* key, std::vector<T>* out, Read read,
               std::string* error) {
  auto a = j.find(key);
  if (a == j.end() || !a->is_array()) {
    *error = std::string(key) + ": missing or not an array";
    return false;
  }
  for (size_t i = 0; i < a->size(); ++i) {
    const json& e = (*a)[i];
    const std::string path = std::string(key) + "[" + std::to_string(i) + "]";
    if (!e.is_object()) {
      *error = path + ": not an object";
      return false;
    }
    T value;
    if (!read(e, path, &value)) return false;
    out->push_back(std::move(value));
  }
  return true;
}

}  // namespace

std::string PriorityReportToJson(const PriorityReport& r) {
  json accounts = json::array();
  for (const sched::FairShareAccount& a : r.accounts) {
    accounts.push_back({{"account", a.account},
                        {"shares", a.shares},
                        {"norm_shares", a.norm_shares},
                        {"usage", a.usage},
                        {"norm_usage", a.norm_usage},
                        {"factor", a.factor}});
  }
  json users = json::array();
  for (const UserUsage& u : r.users) {
    users.push_back({{"account", u.account}, {"user", u.user}, {"usage", u.usage}});
  }
  json jobs = json::array();
  for (const JobPriorityRow& j : r.jobs) {
    jobs.push_back({{"id", j.id},
                    {"user", j.user},
                    {"account", j.account},
                    {"partition", j.partition},
                    {"qos", j.qos},
                    {"priority", j.priority},
                    {"age", j.terms.age},
                    {"fairshare", j.terms.fairshare},
                    {"tier", j.terms.tier},
                    {"qos_term", j.terms.qos},
                    {"size", j.terms.size},
                    {"nice", j.terms.nice}});
  }
  json account_list = json::array();
  for (const AccountEntry& a : r.account_list) {
    account_list.push_back(
        {{"name", a.name}, {"members", a.members}, {"gpu_limit", a.gpu_limit}});
  }
  json user_list = json::array();
  for (const UserEntry& u : r.user_list) {
    user_list.push_back(
        {{"name", u.name}, {"gpu_limit", u.gpu_limit}, {"admin", u.admin}});
  }
  json qos = json::array();
  for (const QosEntry& q : r.qos)
    qos.push_back({{"name", q.name}, {"priority", q.priority}, {"usage", q.usage}});
  const sched::PriorityWeights& w = r.weights;
  return json{{"now", r.now},
              {"half_life_s", r.half_life},
              {"multifactor", r.multifactor},
              {"weights",
               {{"age", w.age},
                {"age_max_s", w.age_max},
                {"fairshare", w.fairshare},
                {"tier", w.tier},
                {"qos", w.qos},
                {"size", w.size}}},
              {"usage_total", r.usage_total},
              {"accounts", std::move(accounts)},
              {"users", std::move(users)},
              {"jobs", std::move(jobs)},
              {"account_list", std::move(account_list)},
              {"user_list", std::move(user_list)},
              {"qos", std::move(qos)}}
      .dump();
}

Result<PriorityReport> PriorityReportFromJson(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Problem("not a JSON object");
  PriorityReport r;
  std::string error;
  const std::string root = "priority";
  auto m = j.find("multifactor");
  if (m == j.end() || !m->is_boolean())
    return Problem("multifactor: missing or not a bool");
  r.multifactor = m->get<bool>();
  auto w = j.find("weights");
  if (w == j.end() || !w->is_object())
    return Problem("weights: missing or not an object");
  const std::string wp = root + ".weights";
  if (!GetField(j, "now", root, &r.now, &error) ||
      !GetField(j, "half_life_s", root, &r.half_life, &error) ||
      !GetField(j, "usage_total", root, &r.usage_total, &error) ||
      !GetField(*w, "age", wp, &r.weights.age, &error) ||
      !GetField(*w, "age_max_s", wp, &r.weights.age_max, &error) ||
      !GetField(*w, "fairshare", wp, &r.weights.fairshare, &error) ||
      !GetField(*w, "tier", wp, &r.weights.tier, &error) ||
      !GetField(*w, "qos", wp, &r.weights.qos, &error) ||
      !GetField(*w, "size", wp, &r.weights.size, &error)) {
    return InvalidArgument(error);
  }
  auto account = [&](const json& e, const std::string& path, sched::FairShareAccount* a) {
    const std::string p = root + "." + path;
    return GetField(e, "account", p, &a->account, &error) &&
           GetField(e, "shares", p, &a->shares, &error) &&
           GetField(e, "norm_shares", p, &a->norm_shares, &error) &&
           GetField(e, "usage", p, &a->usage, &error) &&
           GetField(e, "norm_usage", p, &a->norm_usage, &error) &&
           GetField(e, "factor", p, &a->factor, &error);
  };
  auto user = [&](const json& e, const std::string& path, UserUsage* u) {
    const std::string p = root + "." + path;
    return GetField(e, "account", p, &u->account, &error) &&
           GetField(e, "user", p, &u->user, &error) &&
           GetField(e, "usage", p, &u->usage, &error);
  };
  auto job = [&](const json& e, const std::string& path, JobPriorityRow* row) {
    const std::string p = root + "." + path;
    return GetField(e, "id", p, &row->id, &error) &&
           GetField(e, "user", p, &row->user, &error) &&
           GetField(e, "account", p, &row->account, &error) &&
           GetField(e, "partition", p, &row->partition, &error) &&
           GetField(e, "qos", p, &row->qos, &error) &&
           GetField(e, "priority", p, &row->priority, &error) &&
           GetField(e, "age", p, &row->terms.age, &error) &&
           GetField(e, "fairshare", p, &row->terms.fairshare, &error) &&
           GetField(e, "tier", p, &row->terms.tier, &error) &&
           GetField(e, "qos_term", p, &row->terms.qos, &error) &&
           GetField(e, "size", p, &row->terms.size, &error) &&
           GetField(e, "nice", p, &row->terms.nice, &error);
  };
  auto entry = [&](const json& e, const std::string& path, AccountEntry* a) {
    const std::string p = root + "." + path;
    auto mem = e.find("members");
    if (mem == e.end() || !mem->is_array()) {
      error = p + ".members: missing or not an array";
      return false;
    }
    for (const json& name : *mem) {
      if (!name.is_string()) {
        error = p + ".members: not all strings";
        return false;
      }
      a->members.push_back(name.get<std::string>());
    }
    return GetField(e, "name", p, &a->name, &error) &&
           GetField(e, "gpu_limit", p, &a->gpu_limit, &error);
  };
  auto user_entry = [&](const json& e, const std::string& path, UserEntry* u) {
    const std::string p = root + "." + path;
    auto admin = e.find("admin");
    if (admin == e.end() || !admin->is_boolean()) {
      error = p + ".admin: missing or not a bool";
      return false;
    }
    u->admin = admin->get<bool>();
    return GetField(e, "name", p, &u->name, &error) &&
           GetField(e, "gpu_limit", p, &u->gpu_limit, &error);
  };
  auto qos = [&](const json& e, const std::string& path, QosEntry* q) {
    const std::string p = root + "." + path;
    return GetField(e, "name", p, &q->name, &error) &&
           GetField(e, "priority", p, &q->priority, &error) &&
           GetField(e, "usage", p, &q->usage, &error);
  };
  if (!ReadArray(j, "accounts", &r.accounts, account, &error) ||
      !ReadArray(j, "users", &r.users, user, &error) ||
      !ReadArray(j, "jobs", &r.jobs, job, &error) ||
      !ReadArray(j, "account_list", &r.account_list, entry, &error) ||
      !ReadArray(j, "user_list", &r.user_list, user_entry, &error) ||
      !ReadArray(j, "qos", &r.qos, qos, &error)) {
    return error.rfind("priority.", 0) == 0 ? InvalidArgument(error) : Problem(error);
  }
  return r;
}

}  // namespace hachi::report
