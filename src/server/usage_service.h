// UsageService: what running jobs do with their GPUs, CPUs and memory, on the server
// (docs/efficiency.md). The agents' samples are summed into each running job's current
// run (state/usage.h: bounded, a histogram and a series per GPU); a run's summary goes on
// its JobEnded and the run is written beside that edit (the ledger's Seal hook); the
// running runs are written every usage_flush_s (Flush) and read back after a restart
// (ResumeLocked). Samples are measurements, not records: nothing here is an edit, and
// the store's Load never reads them.
//
// It also judges the idle-GPU policy of each running job's partition (which runs are
// due a warning, a requeue or a cancel: DueIdleLocked; acting on them is the run
// control's) and keeps each GPU's latest utilisation for the node board.
//
// Thread-safety: its state is guarded by the ledger's mu(); the declarations say which
// methods need it held and which take it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/cluster_config.h"
#include "core/clock.h"
#include "report/gpu_report.h"
#include "server/controller_metrics.h"
#include "server/ledger.h"
#include "state/usage.h"

namespace hachi::server {

class UsageService : public OnLedger, public Ledger::Observer {
 public:
  // `config`: the partitions' idle policies (null: none). Not owned; all outlive it.
  UsageService(Ledger* ledger, const config::ClusterConfig* config, const Clock* clock);

  // The running jobs' runs as stored before a restart (at start, before any sample).
  void ResumeLocked() REQUIRES(ledger_->mu());
  // Adds an agent's samples to its jobs' current runs; a sample of a run that ended or
  // was requeued is dropped.
  void AddSamplesLocked(const std::string& node,
                        const std::vector<state::JobUsageSample>& samples)
      REQUIRES(ledger_->mu());

  // A running job's run so far; nullopt when it was never sampled.
  std::optional<state::UsageSummary> SoFarLocked(state::JobId id) const
      REQUIRES(ledger_->mu());
  // The latest utilisation of `gpu` on `node` while the run (job, start) holds it; -1
  // when there is none (an ended job's figure is never shown).
  int GpuUtilLocked(const std::string& node, int gpu, state::JobId job,
                    Time start_time) const REQUIRES(ledger_->mu());
  // /metrics: the running jobs' GPUs as last sampled, and how many are warned idle.
  void GaugesLocked(ClusterGauges* g) const REQUIRES(ledger_->mu());

  // ---- The idle-GPU policy (config::IdleGpuPolicy) ----
  struct IdleVerdict {
    state::JobId job = 0;
    config::IdleAction action = config::IdleAction::kWarn;
    std::string note;  // IdleNoteLocked's
  };
  // The runs whose GPUs stayed idle past their partition's policy and were not warned
  // in this spell yet: marked warned now, once per idle spell.
  std::vector<IdleVerdict> DueIdleLocked(Time now) REQUIRES(ledger_->mu());
  // "idle GPUs: every GPU below 5 % since ... (over 30m, partition gpu's idle policy)"
  // for a job warned idle; "" for another.
  std::string IdleNoteLocked(const state::JobRecord& job) const REQUIRES(ledger_->mu());

  // ---- Reading and writing the runs ----
  // Writes the running jobs' usage that changed since the last write.
  void Flush() EXCLUDES(ledger_->mu());
  // What job `id`'s runs did: the stored runs and, for a running job, its current run
  // as it is now; ascending by start time. kNotFound: no such job.
  Result<std::vector<state::JobUsage>> Runs(state::JobId id) EXCLUDES(ledger_->mu());
  // GPU-hours over [q.from, q.to) from every record, running jobs with their usage so
  // far; `groups`: node → its group (the GPU model, the pool) for q.by == kNodeGroup or
  // kPool; `prices`: node → its pool's price per GPU-hour, for the cost.
  report::GpuReport ReportLocked(const report::ReportQuery& q,
                                 const std::map<std::string, std::string>& groups,
                                 const std::map<std::string, double>& prices) const
      REQUIRES(ledger_->mu());

  // Ledger::Observer: a run that ends (JobEnded) or is requeued takes its summary onto
  // its end and its usage into the commit's batch; back when the write failed.
  void Seal(Ledger::Batch* batch) override;
  void Aborted(Ledger::Batch* batch) override;

 private:
  const config::IdleGpuPolicy* IdlePolicy(const std::string& partition) const;
  void NoteGpuUtilLocked(const std::string& node, const state::JobUsageSample& s)
      REQUIRES(ledger_->mu());

  // Constant after construction.
  const config::ClusterConfig* const config_;
  const Clock* const clock_;

  // The running jobs' current runs, whether each changed since it was last written, and
  // each GPU's latest figures (/metrics, the idle policy).
  struct Track {
    state::JobUsage usage;
    bool dirty = false;
    struct Latest {
      std::string node;
      int gpu = -1;
      int util = -1;
      int64_t mem_mib = -1;
    };
    std::vector<Latest> latest = {};  // one per GPU of the run, as usage.gpus
  };
  std::unordered_map<state::JobId, Track> runs_ GUARDED_BY(ledger_->mu());
  // Per node, per GPU index: the utilisation in the latest sample that had one, and
  // whose run it was. Bounded: one entry per GPU.
  struct GpuUtilSeen {
    state::JobId job = 0;
    Time start_time = 0;
    int util = -1;
  };
  std::unordered_map<std::string, std::vector<GpuUtilSeen>> gpu_util_
      GUARDED_BY(ledger_->mu());
};

}  // namespace hachi::server
