// FairShareService: each account's decayed GPU-seconds, the usage the multifactor
// priority's fair-share factor weighs against the account's share (docs/scheduler.md,
// "Fair share"), and what `sshare` and `sprio` show (GET /api/v1/priority).
//
// A job's GPUs count from its start to its end, a GPU share as 1 GPU (as quotas count
// it); usage halves every `half_life` ([fairshare] half_life). Nothing is stored: the
// usage is a function of the job records, so at start (and on a standby that takes
// over) it is rebuilt from them — each run's interval decayed to now — and from then on
// follows the starts, ends and requeues the ledger applies. Only a job's last run is in
// its record: the earlier runs of a requeued job count while this server watches them,
// not after a restart (as `hachi report`'s GPU-hours).
//
// Each QoS's usage is kept the same way, for `scontrol show assoc_mgr`.
//
// Thread-safety: its state is guarded by the ledger's mu().
#pragma once

#include <unordered_map>

#include "core/clock.h"
#include "report/priority_report.h"
#include "sched/cluster.h"
#include "sched/fair_share.h"
#include "server/controller_options.h"
#include "server/fleet.h"
#include "server/ledger.h"

namespace hachi::server {

class FairShareService : public OnLedger, public Ledger::Observer {
 public:
  // Not owned; all outlive it.
  FairShareService(Ledger* ledger, Fleet* fleet, const ControllerOptions* options);

  // The usage of every job in the records, decayed to now (at start, before any edit).
  void LoadLocked() REQUIRES(ledger_->mu());
  // The accounts' usage as of now, into the cycle's snapshot.
  void FillLocked(sched::FairShare* fs) REQUIRES(ledger_->mu());
  // The accounts, their users and the pending jobs' priority terms as the queue order
  // computes them now (held jobs and those before their --begin left out, as sprio's).
  report::PriorityReport Report() EXCLUDES(ledger_->mu());

  // Ledger::Observer: starts, ends and requeues move the running GPU counts.
  void Applied(const std::vector<state::Edit>& edits) override;

 private:
  struct Running {
    std::vector<int> keys;  // in usage_: its account's, its user's there, its QoS's
    int gpus = 0;
  };
  void StartLocked(const state::JobRecord& r) REQUIRES(ledger_->mu());
  void StopLocked(state::JobId id) REQUIRES(ledger_->mu());

  Fleet* const fleet_;
  const ControllerOptions* const options_;
  // Keys: "a:" + account, "u:" + account + NUL + user (the API refuses a NUL in a
  // name, so no two keys collide), "q:" + QoS.
  sched::DecayedUsage usage_ GUARDED_BY(ledger_->mu());
  std::unordered_map<state::JobId, Running> running_ GUARDED_BY(ledger_->mu());
};

}  // namespace hachi::server
