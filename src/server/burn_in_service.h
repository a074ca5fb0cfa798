// BurnInService: the burn-in gate (docs/burn-in.md) — which checks a node runs before
// it takes jobs, when a registration, a resume or a GPU back from repair starts a run,
// and how an agent's report (or its silence past the timeout) moves the node or its
// GPUs in and out of service. The pure parts (fingerprints, reasons) are burn_in.h's;
// every change of a node goes through the ledger (NodeBurnInChanged, NodeStateChanged,
// NodeHealthChanged) and a run is handed to the node's agent through the AgentHub.
//
// Thread-safety: its state is guarded by the ledger's mu(); the declarations say which
// methods need it held and which take it.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/protocol.h"
#include "config/cluster_config.h"
#include "core/clock.h"
#include "server/agent_hub.h"
#include "server/ledger.h"

namespace hachi::server {

class BurnInService : public OnLedger {
 public:
  // `config`: the checks and their timeout (null: the defaults). Not owned; all
  // outlive it.
  BurnInService(Ledger* ledger, AgentHub* agents, const config::ClusterConfig* config,
                const Clock* clock);

  // At registration: carries the burn-in fields over from `old` (null: a new node) into
  // `rec` and decides whether a run starts (its state, reasons and run number set in
  // `rec`); the run to hand the agent once its session is open.
  std::optional<api::BurnInWork> OnRegisterLocked(const api::AgentRegistration& reg,
                                                  const state::NodeRecord* old,
                                                  state::NodeRecord* rec)
      REQUIRES(ledger_->mu());
  // The edits that start a run of `gpus` (empty: the whole node) on `rec`, and the run
  // in *work (left empty, and no edits, when the node has no checks).
  Result<std::vector<state::Edit>> StartLocked(const state::NodeRecord& rec, GpuSet gpus,
                                               std::optional<api::BurnInWork>* work)
      REQUIRES(ledger_->mu());
  // The node's checks by the config (empty: none).
  std::vector<std::string> ChecksLocked(const std::string& node) const
      REQUIRES(ledger_->mu());
  // Whether the node's checks have not passed with what it registered as now.
  bool UnprovenLocked(const state::NodeRecord& rec) const REQUIRES(ledger_->mu());

  // An agent's result (POST /agents/NODE/burn-in): a pass puts the node or its GPUs in
  // service (and records the node's fingerprint), a failure keeps them out with the
  // failing check as the reason. A superseded run's changes nothing.
  Status Report(const std::string& node, const api::BurnInReport& report)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // Runs whose agent has not reported past their timeout fail (the scheduling loop).
  void CheckLateLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());

 private:
  Duration Timeout() const;
  // A run's end: passed or failed (`check` and `why` say how).
  Status FinishLocked(const state::NodeRecord& rec, bool passed, const std::string& check,
                      const std::string& why)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());

  // Constant after construction.
  AgentHub* const agents_;
  const config::ClusterConfig* const config_;
  const Clock* const clock_;

  // Per node, what its agent registered (the fingerprint its checks vouch for when they
  // pass, and whether its GPUs are simulated), and when its run under way is overdue.
  struct Node {
    std::string fingerprint;
    bool simulated = false;
  };
  std::unordered_map<std::string, Node> nodes_ GUARDED_BY(ledger_->mu());
  std::unordered_map<std::string, Time> deadline_ GUARDED_BY(ledger_->mu());
};

}  // namespace hachi::server
