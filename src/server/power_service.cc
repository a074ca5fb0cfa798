#include "server/power_service.h"

#include <algorithm>
#include <iostream>
#include <set>
#include <string_view>
#include <utility>

#include "core/hostlist.h"

namespace hachi::server {

using sched::PowerState;

PowerService::PowerService(Ledger* ledger, Fleet* fleet, const Authorizer* authorizer,
                           const ControllerOptions* options,
                           std::shared_ptr<PowerPrograms> programs)
    : OnLedger(ledger),
      fleet_(fleet),
      authorizer_(authorizer),
      options_(options),
      programs_(std::move(programs)),
      counting_since_(options->clock->Now()) {
  // The spells a server before this one left open (the first sync goes on with them or
  // closes them). Before any thread runs: the disk is read without the lock.
  if (!options_->config ||
      std::none_of(options_->config->pools.begin(), options_->config->pools.end(),
                   [](const config::PoolConfig& p) {
                     return p.kind == config::PoolKind::kBurst;
                   })) {
    return;
  }
  const Time now = options_->clock->Now();
  Result<std::vector<state::PowerSpell>> left = ledger_->LoadPowerSpells(now, now + 1);
  if (!left.ok()) {
    std::cerr << "hachi server: the burst nodes' powered spells were not read ("
              << left.status().message() << "): the nodes powered now begin new ones\n";
    return;
  }
  for (state::PowerSpell& spell : *left) {
    if (spell.open) left_open_[spell.node] = std::move(spell);
  }
}

namespace {

// The power a node's record says it has, for a server that has not watched it: up or
// drained by an admin, on; in burn-in, in burn-in; down or never registered, off.
PowerState FromRecord(const state::StateImage& image, const std::string& node) {
  auto it = image.nodes.find(node);
  if (it == image.nodes.end()) return PowerState::kOff;
  switch (it->second.state) {
    case state::NodeState::kUp:
    case state::NodeState::kDrained:
      return PowerState::kOn;
    case state::NodeState::kBurnIn:
      return PowerState::kBurnIn;
    case state::NodeState::kDown:
      return PowerState::kOff;
  }
  return PowerState::kOff;
}

std::string Nodes(int n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

// Billed: from the resume's start until the node is off (a failed one is powered down).
bool Powered(PowerState s) { return s != PowerState::kOff && s != PowerState::kFailed; }

}  // namespace

void PowerService::SyncLocked(Time now) {
  fleet_->Held(ledger_);
  // The base changes when nodes register or the config does: every cycle in between
  // finds the same nodes (a cycle of a few hundred burst nodes would otherwise spend
  // its time comparing their names).
  if (synced_generation_ == fleet_->base_generation) return;
  synced_generation_ = fleet_->base_generation;
  std::set<std::string> seen;
  const std::vector<sched::PowerPool>& pools = fleet_->base.pools;
  by_index_.assign(fleet_->base.state.nodes.size(), nullptr);
  for (size_t p = 0; p < pools.size(); ++p) {
    if (!pools[p].burst) continue;
    for (int i : pools[p].nodes) {
      const std::string& name = fleet_->base.state.nodes[i].name;
      seen.insert(name);
      auto [it, fresh] = nodes_.try_emplace(name);
      by_index_[i] = &it->second;
      it->second.pool = static_cast<int>(p);
      it->second.gpus = fleet_->base.state.nodes[i].gpu_count();
      if (!fresh) continue;
      const PowerState s = FromRecord(ledger_->image(), name);
      it->second.power = {s, now, s == PowerState::kOn ? now : 0};
      std::optional<state::PowerSpell> left;
      if (auto l = left_open_.find(name); l != left_open_.end()) {
        left = std::move(l->second);
        left_open_.erase(l);
      }
      if (Powered(s)) {
        BeginSpellLocked(name, &it->second, now, std::move(left));
      } else if (left) {  // off meanwhile: closed where it was last known powered
        left->open = false;
        unsaved_[state::PowerSpellKey(*left)] = *left;
      }
    }
  }
  // Spells of nodes no longer in a burst pool end where they were last known powered.
  for (auto& [name, spell] : left_open_) {
    spell.open = false;
    unsaved_[state::PowerSpellKey(spell)] = spell;
  }
  left_open_.clear();
  std::erase_if(nodes_, [&](const auto& kv) { return !seen.count(kv.first); });
}

void PowerService::BeginSpellLocked(const std::string& name, Node* n, Time now,
                                    std::optional<state::PowerSpell> resumed) {
  fleet_->Held(ledger_);
  if (resumed) {
    // Powered all along (its agent kept the node registered): the time the server was
    // away is billed too.
    n->spell = std::move(*resumed);
    n->spell->until = std::max(n->spell->until, now);
  } else {
    const std::vector<sched::PowerPool>& pools = fleet_->base.pools;
    const double price = n->pool >= 0 && n->pool < static_cast<int>(pools.size())
                             ? pools[n->pool].price_per_gpu_hour
                             : 0.0;
    n->spell = state::PowerSpell{name, now, now, true, PoolName(n->pool), n->gpus, price};
  }
  unsaved_[state::PowerSpellKey(*n->spell)] = *n->spell;
}

double PowerService::CountedLocked(const Node& n, Time now) const {
  if (!n.spell) return 0;
  const Time from = std::max(n.spell->since, counting_since_);
  return now > from ? static_cast<double>(n.gpus) * static_cast<double>(now - from) : 0;
}

void PowerService::EndSpellLocked(Node* n, Time now) {
  if (!n->spell) return;
  n->spell->until = std::max(now, n->spell->since);
  n->spell->open = false;
  unsaved_[state::PowerSpellKey(*n->spell)] = *n->spell;
  n->spell.reset();
}

void PowerService::SetLocked(const std::string& node, PowerState state, Time now,
                             std::string note) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  Node& n = it->second;
  if (Powered(state) && !n.spell) {
    BeginSpellLocked(node, &n, now, std::nullopt);
  } else if (!Powered(state) && n.spell) {
    powered_gpu_seconds_[PoolName(n.pool)] += CountedLocked(n, now);
    EndSpellLocked(&n, now);
  }
  n.power = {state, now, state == PowerState::kOn ? now : 0};
  n.note = std::move(note);
}

bool PowerService::RunLocked(const std::string& action, int pool,
                             const std::vector<std::string>& nodes) {
  fleet_->Held(ledger_);
  if (nodes.empty() || !options_->config ||
      pool >= static_cast<int>(options_->config->pools.size())) {
    return false;
  }
  const config::PoolConfig& pc = options_->config->pools[pool];
  // Each action's program in the pool's config.
  static constexpr std::pair<std::string_view, std::string config::PoolConfig::*>
      kPrograms[] = {{"resume", &config::PoolConfig::resume_program},
                     {"suspend", &config::PoolConfig::suspend_program},
                     {"resume-failed", &config::PoolConfig::resume_fail_program}};
  PowerPrograms::Call call;
  for (const auto& [name, program] : kPrograms) {
    if (name == action) call.program = pc.*program;
  }
  if (call.program.empty()) return false;
  call.hostlist = CompressHostList(nodes);
  call.pool = pc.name;
  call.action = action;
  // A program that hangs is ended: a resume by its pool's timeout (it failed), the
  // others by the same span.
  call.limit = pc.resume_timeout;
  std::cerr << "hachi server: pool " << pc.name << ": " << action << " " << call.hostlist
            << ": " << call.program << "\n";
  Result<int> id = programs_->Start(call);
  if (!id.ok()) {
    std::cerr << "hachi server: pool " << pc.name << ": " << id.status().message()
              << "\n";
    return false;
  }
  calls_[*id] = Call{action, pool, nodes};
  return true;
}

void PowerService::FailLocked(int pool, const std::vector<std::string>& nodes,
                              const std::string& why, Time now) {
  for (const std::string& n : nodes) SetLocked(n, PowerState::kFailed, now, why);
  std::cerr << "hachi server: " << CompressHostList(nodes) << ": resume failed: " << why
            << "\n";
  RunLocked("resume-failed", pool, nodes);
  RunLocked("suspend", pool, nodes);  // a half-booted node is not paid for
}

void PowerService::SuspendLocked(int pool, const std::vector<std::string>& nodes,
                                 Time now) {
  // Its burn-in pass no longer vouches for it: the node that boots next time may be
  // other hardware (a cloud's new instance) or broken since.
  std::vector<state::Edit> edits;
  for (const std::string& n : nodes) {
    auto rec = ledger_->image().nodes.find(n);
    if (rec == ledger_->image().nodes.end() || rec->second.burn_in_passed.empty())
      continue;
    const state::NodeRecord& r = rec->second;
    edits.push_back(
        state::NodeBurnInChanged{n, "", r.burn_in_run, r.burn_in, r.burn_in_gpus});
  }
  if (!edits.empty()) {
    if (Status s = ledger_->Commit(std::move(edits)); !s.ok()) {
      std::cerr << "hachi server: suspend " << CompressHostList(nodes) << ": "
                << s.message() << "\n";
      return;  // tried again next cycle: the nodes are still on and idle
    }
  }
  for (const std::string& n : nodes) {
    SetLocked(n, PowerState::kSuspending, now, "suspend program running");
  }
  if (!RunLocked("suspend", pool, nodes)) {
    for (const std::string& n : nodes) {
      SetLocked(n, PowerState::kOff, now, "no suspend program ran");
    }
  }
}

void PowerService::TakeEndedLocked(Time now) {
  for (const PowerPrograms::Ended& e : programs_->Poll()) {
    auto it = calls_.find(e.id);
    if (it == calls_.end()) continue;
    const Call call = std::move(it->second);
    calls_.erase(it);
    const std::string what = call.action + " program " + e.how;
    if (!e.ok) {
      std::cerr << "hachi server: " << CompressHostList(call.nodes) << ": " << what
                << "\n";
    }
    if (call.action == "resume" && !e.ok) {
      // The nodes that have not registered meanwhile failed.
      std::vector<std::string> failed;
      for (const std::string& n : call.nodes) {
        auto node = nodes_.find(n);
        if (node != nodes_.end() && node->second.power.state == PowerState::kResuming)
          failed.push_back(n);
      }
      if (!failed.empty()) FailLocked(call.pool, failed, what, now);
    } else if (call.action == "suspend") {
      for (const std::string& n : call.nodes) {
        auto node = nodes_.find(n);
        if (node == nodes_.end()) continue;
        // A failed node stays failed (and off); one that registered meanwhile is on.
        // A suspend that failed leaves the node powered as far as anyone knows: on
        // (billed, its spell goes on), idle from now, so it is tried again after
        // suspend_after.
        if (node->second.power.state == PowerState::kSuspending) {
          SetLocked(n, e.ok ? PowerState::kOff : PowerState::kOn, now,
                    e.ok ? "" : what + "; still powered, suspended again when idle");
        } else if (node->second.power.state == PowerState::kFailed && !e.ok) {
          node->second.note += "; " + what;
        }
      }
    }
  }
}

void PowerService::MaskLocked(sched::ClusterState* snap) {
  fleet_->Held(ledger_);
  const Time now = options_->clock->Now();
  SyncLocked(now);
  TakeEndedLocked(now);
  // Burn-in failures seen since the last cycle: reported and powered down.
  std::map<int, std::vector<std::string>> broken;
  for (const std::string& n : broken_) {
    auto it = nodes_.find(n);
    if (it != nodes_.end()) broken[it->second.pool].push_back(n);
  }
  broken_.clear();
  for (const auto& [pool, names] : broken) {
    std::cerr << "hachi server: " << CompressHostList(names)
              << ": failed burn-in after resume: powering down\n";
    RunLocked("resume-failed", pool, names);
    RunLocked("suspend", pool, names);
  }
  if (nodes_.empty()) return;                          // no burst pool: nothing to mask
  if (snap->nodes.size() != by_index_.size()) return;  // not the base's (never)
  for (size_t i = 0; i < snap->nodes.size(); ++i) {
    if (by_index_[i] != nullptr && by_index_[i]->power.state != PowerState::kOn) {
      snap->nodes[i].state = sched::NodeState::kDown;
    }
  }
}

const PowerService::Node* PowerService::NodeAt(const sched::ClusterState& snap,
                                               int i) const {
  if (i < 0 || static_cast<size_t>(i) >= by_index_.size() ||
      snap.nodes.size() != by_index_.size()) {
    return nullptr;
  }
  return by_index_[i];
}

std::map<int, std::vector<std::string>> PowerService::ByPoolLocked(
    const sched::ClusterState& snap, const std::vector<int>& nodes) const {
  std::map<int, std::vector<std::string>> out;
  for (int i : nodes) {
    if (const Node* n = NodeAt(snap, i)) out[n->pool].push_back(snap.nodes[i].name);
  }
  return out;
}

void PowerService::PlanLocked(const sched::ClusterState& snap, const sched::Plan& plan,
                              Time now) {
  fleet_->Held(ledger_);
  waits_.clear();
  const std::vector<sched::PowerPool>& pools = fleet_->base.pools;
  if (nodes_.empty() || snap.nodes.size() != by_index_.size()) return;
  // This cycle's starts: their nodes are not idle, whatever the snapshot said.
  std::vector<bool> started(snap.nodes.size(), false);
  for (const sched::Start& st : plan.starts) {
    for (const sched::Allocation& a : st.allocations) {
      if (a.node >= 0 && static_cast<size_t>(a.node) < started.size())
        started[a.node] = true;
    }
  }
  std::vector<sched::NodePower> power(snap.nodes.size());
  for (size_t i = 0; i < snap.nodes.size(); ++i) {
    if (by_index_[i] == nullptr) continue;
    sched::NodePower& np = by_index_[i]->power;
    if (np.state == PowerState::kOn) {
      const bool idle = sched::IsEmpty(snap.nodes[i]) && !started[i];
      np.idle_since = idle ? (np.idle_since > 0 ? np.idle_since : now) : 0;
    }
    power[i] = np;
  }
  const sched::PowerPlan p = sched::PlanPower(snap, plan, pools, power, now);
  for (const auto& [pool, names] : ByPoolLocked(snap, p.timed_out)) {
    FailLocked(pool, names,
               "did not register within " + FormatDuration(pools[pool].resume_timeout),
               now);
  }
  for (const auto& [pool, names] : ByPoolLocked(snap, p.resume)) {
    for (const std::string& n : names) {
      SetLocked(n, PowerState::kResuming, now, "");
    }
    if (!RunLocked("resume", pool, names)) {
      FailLocked(pool, names, "its resume program did not start", now);
    }
  }
  std::vector<int> idle;  // never a node this cycle started a job on
  for (int i : p.suspend) {
    if (!started[i]) idle.push_back(i);
  }
  for (const auto& [pool, names] : ByPoolLocked(snap, idle))
    SuspendLocked(pool, names, now);
  // What the waiting jobs are told.
  for (const sched::PowerPlan::Waiting& w : p.waiting) {
    if (w.pool < 0 || w.pool >= static_cast<int>(pools.size())) continue;
    const sched::PowerPool& pool = pools[w.pool];
    Time latest = -1;  // the last resume of the pool's nodes under way
    int burning = 0;
    for (int i : pool.nodes) {
      const Node* n = NodeAt(snap, i);
      if (n == nullptr) continue;
      const sched::NodePower& np = n->power;
      if (np.state == PowerState::kResuming) latest = std::max(latest, np.since);
      if (np.state == PowerState::kBurnIn) ++burning;
    }
    std::string note = "resuming " + Nodes(w.nodes) + " of pool " + pool.name;
    if (latest >= 0) {
      note += ", " +
              FormatDuration(std::max<Time>(0, latest + pool.resume_timeout - now)) +
              " left of " + FormatDuration(pool.resume_timeout);
    } else if (burning > 0) {
      note += ", in burn-in";
    }
    std::string& text = waits_[w.job];
    text += text.empty() ? note : "; " + note;
  }
  // p.wake_at (a resume's timeout, an idle node's suspend) is later, never now: the
  // loop's timer (cycle_interval_ms) finds it due. A wake-up here would run cycles back
  // to back for as long as a burst node is idle or resuming.
}

std::optional<PowerService::NodeView> PowerService::NodeLocked(
    const std::string& node) const {
  fleet_->Held(ledger_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  const Node& n = it->second;
  NodeView v;
  if (n.pool >= 0 && n.pool < static_cast<int>(fleet_->base.pools.size())) {
    v.pool = fleet_->base.pools[n.pool].name;
  }
  v.state = std::string(sched::PowerStateName(n.power.state));
  v.note = n.note;
  if (n.power.state == PowerState::kResuming && n.pool >= 0 &&
      n.pool < static_cast<int>(fleet_->base.pools.size())) {
    const Duration timeout = fleet_->base.pools[n.pool].resume_timeout;
    const Time left = n.power.since + timeout - options_->clock->Now();
    v.note = "resuming, " + FormatDuration(std::max<Time>(0, left)) + " left of " +
             FormatDuration(timeout);
  }
  return v;
}

std::string PowerService::PoolName(int pool) const {
  fleet_->Held(ledger_);
  const std::vector<sched::PowerPool>& pools = fleet_->base.pools;
  return pool >= 0 && pool < static_cast<int>(pools.size()) ? pools[pool].name : "";
}

std::vector<sched::PoolPower> PowerService::PoolsLocked() const {
  fleet_->Held(ledger_);
  const Time now = options_->clock->Now();
  std::vector<sched::PoolPower> out;
  for (const sched::PowerPool& p : fleet_->base.pools) {
    sched::PoolPower v;
    v.name = p.name;
    v.burst = p.burst;
    v.price_per_gpu_hour = p.price_per_gpu_hour;
    v.nodes = static_cast<int>(p.nodes.size());
    for (int i : p.nodes) v.gpus += fleet_->base.state.nodes[i].gpu_count();
    v.powered = p.burst ? 0 : v.nodes;
    if (auto it = powered_gpu_seconds_.find(p.name); it != powered_gpu_seconds_.end()) {
      v.powered_gpu_seconds = it->second;
    }
    out.push_back(std::move(v));
  }
  for (const auto& [name, n] : nodes_) {
    if (n.pool < 0 || n.pool >= static_cast<int>(out.size())) continue;
    sched::PoolPower& v = out[n.pool];
    if (Powered(n.power.state)) ++v.powered;
    v.powered_gpu_seconds += CountedLocked(n, now);
  }
  return out;
}

void PowerService::Flush() {
  MutexLock flushing(&flush_mu_);
  std::vector<state::PowerSpell> save;
  {
    MutexLock lock(&ledger_->mu());
    const Time now = options_->clock->Now();
    for (auto& [name, n] : nodes_) {
      if (!n.spell || n.spell->until >= now) continue;
      n.spell->until = now;
      unsaved_[state::PowerSpellKey(*n.spell)] = *n.spell;
    }
    for (auto& [key, spell] : unsaved_) save.push_back(std::move(spell));
    unsaved_.clear();
  }
  if (save.empty()) return;
  if (Status s = ledger_->SavePowerSpells(save); !s.ok()) {
    std::cerr << "hachi server: " << save.size()
              << " powered spells of burst nodes not written: " << s.message() << "\n";
    MutexLock lock(&ledger_->mu());
    for (state::PowerSpell& spell : save) {  // tried again; a newer copy stays
      unsaved_.try_emplace(state::PowerSpellKey(spell), std::move(spell));
    }
  }
}

Result<std::map<std::string, PowerService::PoolCost>> PowerService::Costs(Time from,
                                                                          Time to) {
  // What the store has, and over it what is newer in memory: the spells under way as
  // of now, and those changed since the last Flush (which cannot run meanwhile). A read
  // writes nothing.
  MutexLock flushing(&flush_mu_);
  std::map<std::string, state::PowerSpell> newer;
  {
    MutexLock lock(&ledger_->mu());
    const Time now = options_->clock->Now();
    newer = unsaved_;
    for (const auto& [name, n] : nodes_) {
      if (!n.spell) continue;
      state::PowerSpell s = *n.spell;
      s.until = std::max(s.until, now);
      newer[state::PowerSpellKey(s)] = std::move(s);
    }
  }
  Result<std::vector<state::PowerSpell>> stored = ledger_->LoadPowerSpells(from, to);
  if (!stored.ok()) return stored.status();
  std::vector<state::PowerSpell> spells;
  for (state::PowerSpell& s : *stored) {
    if (!newer.count(state::PowerSpellKey(s))) spells.push_back(std::move(s));
  }
  for (auto& [key, s] : newer) spells.push_back(std::move(s));
  std::map<std::string, PoolCost> out;
  for (const state::PowerSpell& spell : spells) {
    const double gpu_seconds = state::SpellGpuSeconds(spell, from, to);
    PoolCost& c = out[spell.pool];
    c.gpu_seconds += gpu_seconds;
    c.cost += gpu_seconds / 3600.0 * spell.price_per_gpu_hour;
  }
  return out;
}

std::string PowerService::WaitNoteLocked(state::JobId job) const {
  auto it = waits_.find(job);
  return it == waits_.end() ? std::string() : it->second;
}

Result<bool> PowerService::ResetFailed(const std::string& node, const Caller& who) {
  {
    MutexLock lock(&ledger_->mu());
    auto it = nodes_.find(node);
    if (it == nodes_.end() || it->second.power.state != PowerState::kFailed) return false;
  }
  HACHI_RETURN_IF_ERROR(
      authorizer_->Authorize(who, Action::kResume, Resource::Node(node)));
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.power.state != PowerState::kFailed) return false;
  SetLocked(node, PowerState::kOff, options_->clock->Now(), "");
  std::cerr << "hachi server: " << node << ": resume failure cleared by " << who.user
            << "\n";
  fleet_->WakeLocked();
  return true;
}

void PowerService::Applied(const std::vector<state::Edit>& edits) {
  ledger_->mu().AssertHeld();
  fleet_->Held(ledger_);
  const Time now = options_->clock->Now();
  bool changed = false;
  for (const state::Edit& e : edits) {
    if (const auto* up = std::get_if<state::NodeUpserted>(&e)) {
      auto it = nodes_.find(up->record.name);
      if (it == nodes_.end()) continue;
      const PowerState s = it->second.power.state;
      // Registered: powered, whatever this server asked (a node booted by hand counts).
      // A node being suspended stays so: its agent is on its way out.
      if (s == PowerState::kOn || s == PowerState::kBurnIn ||
          s == PowerState::kSuspending) {
        continue;
      }
      const bool checking = up->record.state == state::NodeState::kBurnIn;
      SetLocked(up->record.name, checking ? PowerState::kBurnIn : PowerState::kOn, now,
                "");
      changed = true;
    } else if (const auto* st = std::get_if<state::NodeStateChanged>(&e)) {
      auto it = nodes_.find(st->name);
      if (it == nodes_.end() || it->second.power.state != PowerState::kBurnIn) continue;
      if (st->state == state::NodeState::kUp || st->state == state::NodeState::kDrained) {
        SetLocked(st->name, PowerState::kOn, now, "");
        changed = true;
      }
    } else if (const auto* b = std::get_if<state::NodeBurnInChanged>(&e)) {
      auto it = nodes_.find(b->name);
      if (it == nodes_.end() || it->second.power.state != PowerState::kBurnIn ||
          b->phase != state::BurnInPhase::kFailed) {
        continue;
      }
      auto rec = ledger_->image().nodes.find(b->name);
      SetLocked(b->name, PowerState::kFailed, now,
                "failed burn-in after resume" + (rec != ledger_->image().nodes.end() &&
                                                         !rec->second.state_reason.empty()
                                                     ? ": " + rec->second.state_reason
                                                     : std::string()));
      broken_.push_back(b->name);
      changed = true;
    }
  }
  if (changed) fleet_->WakeLocked();
}

}  // namespace hachi::server
