// PowerService: burst pools powered up and down (docs/pools.md). After every cycle it
// asks the shared rule (sched/power.h, the one `hachi sim` uses) which powered-off
// nodes the waiting jobs need and which idle ones to let go, runs the pools' programs
// for them (power_programs.h), and follows each node through its power states:
//
//   off ──resume──▶ resuming ──registers──▶ burn-in ──passes──▶ on ──idle──▶ suspending
//    ▲                 │ times out, program fails      │ fails                 │
//    │                 ▼                               ▼                       │
//    │            resume-failed ◀──────────────────────┘                       │
//    └─────────────────────────────── program ends ─────────────────────────────┘
//
// (a node that registers with no burn-in checks goes from resuming to on). A node
// that is not on takes no job: the cycle's snapshot shows it down. A failed node is
// reported and powered down (the pool's resume-failure program, then its suspend
// program) and not resumed again until it registers or an admin resumes it. A node is
// suspended only with nothing on it, and its burn-in pass is forgotten then, so it
// proves itself again when it next boots.
//
// The power states are kept in memory: a server that starts (or a standby that takes
// over) reads them from the records — a burst node registered and up is on, one in
// burn-in is in burn-in, any other is off. What the nodes cost is durable: each powered
// spell (state/power_spells.h) is written to the store when it begins, moved on every
// usage_flush_s (Flush) and closed when the node is off; a server that starts goes on
// with the open spells of nodes still powered and closes the others where they were
// last known powered, so a month's cost survives restarts and failovers (losing at
// most the last flush interval of a crash).
//
// Thread-safety: its state is guarded by the ledger's mu().
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/plan.h"
#include "sched/power.h"
#include "server/authorizer.h"
#include "server/controller_options.h"
#include "server/fleet.h"
#include "server/ledger.h"
#include "server/power_programs.h"
#include "state/power_spells.h"

namespace hachi::server {

class PowerService : public OnLedger, public Ledger::Observer {
 public:
  // Not owned; all outlive it.
  PowerService(Ledger* ledger, Fleet* fleet, const Authorizer* authorizer,
               const ControllerOptions* options, std::shared_ptr<PowerPrograms> programs);

  // The cycle's snapshot: the burst nodes that are not on are down in it (and the
  // programs that ended since the last cycle are taken in first).
  void MaskLocked(sched::ClusterState* snap) REQUIRES(ledger_->mu());
  // After the cycle's starts are applied: resumes for the jobs that wait, suspends of
  // idle nodes, resumes timed out. `snap` is the snapshot the plan was made on.
  void PlanLocked(const sched::ClusterState& snap, const sched::Plan& plan, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());

  // What the views show. A node of a burst pool: its pool, its power state's name and
  // a note ("resuming, 3m10s left of 10m"); nullopt for any other node.
  struct NodeView {
    std::string pool;
    std::string state;
    std::string note;
  };
  std::optional<NodeView> NodeLocked(const std::string& node) const
      REQUIRES(ledger_->mu());
  // Each pool of the config; its powered GPU-seconds are since this server started (in
  // memory: /metrics' counter, which Prometheus carries across restarts) — what the
  // cloud bills, whether jobs used the nodes or not.
  std::vector<sched::PoolPower> PoolsLocked() const REQUIRES(ledger_->mu());
  // Each pool's powered GPU-seconds and what they cost over [from, to), from the
  // stored spells (each at the price its pool had when it began) and, newer, the ones
  // under way and those not written yet. Reads the store; writes nothing.
  struct PoolCost {
    double gpu_seconds = 0;
    double cost = 0;
  };
  Result<std::map<std::string, PoolCost>> Costs(Time from, Time to)
      EXCLUDES(flush_mu_, ledger_->mu());
  // Writes the spells begun, ended or moved on since the last call (the scheduling
  // loop, every usage_flush_s, and the controller's stop).
  void Flush() EXCLUDES(flush_mu_, ledger_->mu());

  // Why a pending job waits for power ("resuming 2 nodes of pool burst-a, 3m10s left
  // of 10m"); "" when it does not.
  std::string WaitNoteLocked(state::JobId job) const REQUIRES(ledger_->mu());

  // An admin's `hachi resume NODE` of a burst node whose resume failed: it is off again
  // (the scheduler may power it up). False, and nothing changed, for any other node.
  Result<bool> ResetFailed(const std::string& node, const Caller& who)
      EXCLUDES(ledger_->mu());

  // Ledger::Observer: registrations and burn-in results move nodes on.
  void Applied(const std::vector<state::Edit>& edits) override;

 private:
  struct Node {
    int pool = -1;  // in fleet_->base.pools
    sched::NodePower power;
    std::string note;
    int gpus = 0;
    std::optional<state::PowerSpell> spell;  // powered: since the resume began
  };
  struct Call {
    std::string action;
    int pool = -1;
    std::vector<std::string> nodes;
  };
  // A node of the base's burst pools that this service has not met gets its state from
  // the records; nodes no longer in a burst pool are dropped.
  void SyncLocked(Time now) REQUIRES(ledger_->mu());
  void TakeEndedLocked(Time now) REQUIRES(ledger_->mu());
  // Runs `action`'s program of pool `pool` for `nodes`; false when it could not start
  // (said on stderr and in the nodes' notes).
  bool RunLocked(const std::string& action, int pool,
                 const std::vector<std::string>& nodes) REQUIRES(ledger_->mu());
  // `nodes` failed to resume (`why`): the failure program, then the suspend program.
  void FailLocked(int pool, const std::vector<std::string>& nodes, const std::string& why,
                  Time now) REQUIRES(ledger_->mu());
  // Their burn-in passes forgotten, then the suspend program.
  void SuspendLocked(int pool, const std::vector<std::string>& nodes, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  std::string PoolName(int pool) const REQUIRES(ledger_->mu());
  // The burst node at index `i` of `snap` (a snapshot of the base); nullptr for another.
  const Node* NodeAt(const sched::ClusterState& snap, int i) const
      REQUIRES(ledger_->mu());
  // The names of `nodes` (indices into `snap`), by their pool.
  std::map<int, std::vector<std::string>> ByPoolLocked(
      const sched::ClusterState& snap, const std::vector<int>& nodes) const
      REQUIRES(ledger_->mu());
  void SetLocked(const std::string& node, sched::PowerState state, Time now,
                 std::string note) REQUIRES(ledger_->mu());
  // A node's spell begins at `now` (or goes on with `resumed`, a spell a server before
  // this one began), or ends at `now`.
  void BeginSpellLocked(const std::string& name, Node* n, Time now,
                        std::optional<state::PowerSpell> resumed) REQUIRES(ledger_->mu());
  void EndSpellLocked(Node* n, Time now) REQUIRES(ledger_->mu());

  // Constant after construction.
  Fleet* const fleet_;
  const Authorizer* const authorizer_;
  const ControllerOptions* const options_;
  const std::shared_ptr<PowerPrograms> programs_;

  std::map<std::string, Node> nodes_ GUARDED_BY(ledger_->mu());
  // The base's nodes in its order (its snapshots' too): each burst node's entry in
  // nodes_, nullptr for the others. Made by SyncLocked when the base changes.
  std::vector<Node*> by_index_ GUARDED_BY(ledger_->mu());
  uint64_t synced_generation_ GUARDED_BY(ledger_->mu()) = ~uint64_t{0};
  std::unordered_map<int, Call> calls_ GUARDED_BY(ledger_->mu());  // by program run id
  std::unordered_map<state::JobId, std::string> waits_ GUARDED_BY(ledger_->mu());
  // Nodes whose burn-in failed since the last cycle: failed and powered down by it.
  std::vector<std::string> broken_ GUARDED_BY(ledger_->mu());
  // When this service began counting: /metrics' counter counts a spell from here at the
  // earliest (one a server before it began is that server's). Constant after
  // construction.
  const Time counting_since_;
  // GPU-seconds of `spell` from counting_since_ until `now`.
  double CountedLocked(const Node& n, Time now) const REQUIRES(ledger_->mu());
  // Per pool name: GPU-seconds of its nodes' powered spells that have ended.
  std::map<std::string, double> powered_gpu_seconds_ GUARDED_BY(ledger_->mu());
  // The open spells a server before this one left in the store, by node: taken up by
  // the first sync (a node still powered goes on with its spell; the others are closed).
  std::map<std::string, state::PowerSpell> left_open_ GUARDED_BY(ledger_->mu());
  // Spells to write at the next Flush, by key (a later change of one replaces it).
  std::map<std::string, state::PowerSpell> unsaved_ GUARDED_BY(ledger_->mu());
  // One Flush at a time, so that an older copy of a spell is never written after a newer.
  Mutex flush_mu_ ACQUIRED_BEFORE(ledger_->mu());
};

}  // namespace hachi::server
