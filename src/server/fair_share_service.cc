#include "server/fair_share_service.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sched/priority.h"
#include "sched/scheduler.h"
#include "server/snapshot.h"

namespace hachi::server {
namespace {

std::string AccountKey(const std::string& account) { return "a:" + account; }
std::string UserKey(const std::string& account, const std::string& user) {
  std::string k = "u:" + account;
  k.push_back('\0');
  return k + user;
}
std::string QosKey(const std::string& qos) { return "q:" + qos; }

// The meter's keys a job's GPUs count under: its account, its user there, its QoS.
std::vector<int> KeysOf(sched::DecayedUsage* usage, const state::JobRecord& r) {
  std::vector<int> keys = {usage->Index(AccountKey(r.req.account)),
                           usage->Index(UserKey(r.req.account, r.req.user))};
  if (!r.req.qos.empty()) keys.push_back(usage->Index(QosKey(r.req.qos)));
  return keys;
}

Duration HalfLife(const ControllerOptions& o) {
  return o.config ? o.config->fairshare_half_life
                  : config::ClusterConfig{}.fairshare_half_life;
}

// The association tree (sacctmgr show): what the config names and what was used.
void AddAssociations(const config::ClusterConfig* config, const sched::ClusterState& base,
                     report::PriorityReport* r) {
  std::map<std::string, report::AccountEntry> accounts;
  std::map<std::string, report::UserEntry> users;
  auto account = [&](const std::string& name) -> report::AccountEntry& {
    report::AccountEntry& a = accounts[name];
    a.name = name;
    return a;
  };
  auto user = [&](const std::string& name) -> report::UserEntry& {
    report::UserEntry& u = users[name];
    u.name = name;
    return u;
  };
  if (config != nullptr) {
    for (const config::AccountConfig& a : config->accounts) {
      report::AccountEntry& e = account(a.name);
      e.members = a.members;
      for (const std::string& m : a.members) user(m);
    }
    for (const std::string& admin : config->auth.admins) user(admin).admin = true;
  }
  for (const auto& [name, share] : base.fairshare.shares) account(name);
  for (const auto& [name, gpus] : base.limits.account_gpus)
    account(name).gpu_limit = gpus;
  for (const auto& [name, gpus] : base.limits.user_gpus) user(name).gpu_limit = gpus;
  for (const sched::FairShareAccount& a : r->accounts) account(a.account);
  for (const report::UserUsage& u : r->users) user(u.user);
  // Root (on the server's socket) is always an admin.
  if (auto root = users.find("root"); root != users.end()) root->second.admin = true;
  for (auto& [name, a] : accounts) {
    std::sort(a.members.begin(), a.members.end());
    r->account_list.push_back(std::move(a));
  }
  for (auto& [name, u] : users) r->user_list.push_back(std::move(u));
  for (const sched::Qos& q : base.qos) r->qos.push_back({q.name, q.priority, 0});
}

}  // namespace

FairShareService::FairShareService(Ledger* ledger, Fleet* fleet,
                                   const ControllerOptions* options)
    : OnLedger(ledger), fleet_(fleet), options_(options), usage_(HalfLife(*options)) {}

void FairShareService::LoadLocked() {
  const Time now = options_->clock->Now();
  usage_.AdvanceTo(now);
  for (const auto& [id, r] : ledger_->image().jobs) {
    const int gpus = r.req.TotalGpus();
    if (r.start_time <= 0 || gpus <= 0) continue;
    if (r.state == state::JobState::kRunning) {
      StartLocked(r);  // its past part, and its GPUs from now on
    } else if (state::IsFinal(r.state) && r.end_time > r.start_time) {
      for (int key : KeysOf(&usage_, r)) {
        usage_.AddPast(key, gpus, r.start_time, r.end_time);
      }
    }
  }
}

void FairShareService::StartLocked(const state::JobRecord& r) {
  const int gpus = r.req.TotalGpus();
  if (gpus <= 0 || running_.count(r.id)) return;
  Running run{KeysOf(&usage_, r), gpus};
  for (int key : run.keys) {
    // A start the meter learns of late (at load) counts from the run's own start.
    usage_.AddPast(key, gpus, r.start_time, usage_.now());
    usage_.AddRunning(key, gpus);
  }
  running_.emplace(r.id, std::move(run));
}

void FairShareService::StopLocked(state::JobId id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  for (int key : it->second.keys) usage_.AddRunning(key, -it->second.gpus);
  running_.erase(it);
}

void FairShareService::Applied(const std::vector<state::Edit>& edits) {
  ledger_->mu().AssertHeld();
  usage_.AdvanceTo(options_->clock->Now());
  for (const state::Edit& e : edits) {
    if (const auto* s = std::get_if<state::JobStarted>(&e)) {
      auto it = ledger_->image().jobs.find(s->id);
      if (it != ledger_->image().jobs.end()) StartLocked(it->second);
    } else if (const auto* end = std::get_if<state::JobEnded>(&e)) {
      StopLocked(end->id);
    } else if (const auto* q = std::get_if<state::JobRequeued>(&e)) {
      StopLocked(q->id);
    }
  }
}

void FairShareService::FillLocked(sched::FairShare* fs) {
  usage_.AdvanceTo(options_->clock->Now());
  fs->usage.clear();
  for (size_t i = 0; i < usage_.size(); ++i) {
    const std::string& key = usage_.key(static_cast<int>(i));
    if (key.rfind("a:", 0) == 0)
      fs->usage[key.substr(2)] = usage_.usage(static_cast<int>(i));
  }
}

report::PriorityReport FairShareService::Report() {
  report::PriorityReport r;
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  const Time now = options_->clock->Now();
  r.now = now;
  r.half_life = HalfLife(*options_);
  r.multifactor = sched::PolicyUsesPriority(options_->sched.policy);
  const sched::ClusterState& base = fleet_->base.state;
  r.weights = base.weights;
  sched::FairShare fs = base.fairshare;
  FillLocked(&fs);
  r.accounts = sched::FairShareFactors(fs);
  for (const auto& [account, used] : fs.usage) {
    r.usage_total += used;
    if (!fs.shares.count(account)) {  // used, but has no share: factor 0 (or 1 if none)
      sched::FairShareAccount a;
      a.account = account;
      a.usage = used;
      a.factor = sched::FactorOf(r.accounts, account);
      r.accounts.push_back(std::move(a));
    }
  }
  for (sched::FairShareAccount& a : r.accounts) {
    a.norm_usage = r.usage_total > 0 ? a.usage / r.usage_total : 0;
  }
  std::sort(r.accounts.begin(), r.accounts.end(),
            [](const sched::FairShareAccount& x, const sched::FairShareAccount& y) {
              return x.account < y.account;
            });
  for (size_t i = 0; i < usage_.size(); ++i) {
    const std::string& key = usage_.key(static_cast<int>(i));
    const size_t nul = key.find('\0');
    if (key.rfind("u:", 0) != 0 || nul == std::string::npos) continue;
    r.users.push_back(
        {key.substr(2, nul - 2), key.substr(nul + 1), usage_.usage(static_cast<int>(i))});
  }
  std::sort(r.users.begin(), r.users.end(),
            [](const report::UserUsage& x, const report::UserUsage& y) {
              return std::tie(x.account, x.user) < std::tie(y.account, y.user);
            });
  // The pending jobs' terms, at the time the order rounds to.
  const Time t = sched::PriorityTime(now, options_->sched.priority_period);
  const std::vector<sched::FairShareAccount> factors = sched::FairShareFactors(fs);
  const int largest = sched::LargestNode(base);
  std::vector<std::pair<Time, report::JobPriorityRow>> jobs;  // with submit times
  for (state::JobId id : ledger_->active()) {
    auto it = ledger_->image().jobs.find(id);
    if (it == ledger_->image().jobs.end() ||
        it->second.state != state::JobState::kPending) {
      continue;
    }
    const state::JobRecord& rec = it->second;
    // As Slurm's sprio: a held job (priority 0) or one not eligible yet (--begin) is not
    // listed.
    if (rec.held || rec.req.begin_time > now) continue;
    report::JobPriorityRow row;
    row.id = id;
    row.user = rec.req.user;
    row.account = rec.req.account;
    row.partition = rec.req.partition;
    row.qos = rec.req.qos;
    if (r.multifactor) {
      row.terms =
          sched::JobPriorityTerms(base, ToSchedJob(base, rec), t,
                                  sched::FactorOf(factors, rec.req.account), largest);
      row.priority = row.terms.Total();
    }
    jobs.emplace_back(rec.submit_time, std::move(row));
  }
  // The order's: priority, then submit time, then id.
  std::sort(jobs.begin(), jobs.end(), [](const auto& x, const auto& y) {
    if (x.second.priority != y.second.priority)
      return x.second.priority > y.second.priority;
    if (x.first != y.first) return x.first < y.first;
    return x.second.id < y.second.id;
  });
  for (auto& [submit, row] : jobs) r.jobs.push_back(std::move(row));
  AddAssociations(options_->config ? &*options_->config : nullptr, base, &r);
  for (report::QosEntry& q : r.qos) {
    if (const int key = usage_.Find(QosKey(q.name)); key >= 0)
      q.usage = usage_.usage(key);
  }
  return r;
}

}  // namespace hachi::server
