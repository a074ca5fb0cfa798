// JobService: what users do to jobs — submit (and sbatch --test-only), cancel, hold and
// release, signal, requeue, update. Each checks who asks (the Authorizer), checks the
// request against the records, and writes through the ledger; running jobs are
// stopped or signalled through their agents (the Fleet's run control). It also keeps
// what each user has pending, for the submit bounds (ControllerOptions::max_pending_*),
// and the recent submits' idempotency keys.
//
// Thread-safety: every public method may be called from any thread; its state is
// guarded by the ledger's mu().
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/protocol.h"
#include "core/status.h"
#include "server/authorizer.h"
#include "server/controller_options.h"
#include "server/fleet.h"
#include "server/ledger.h"
#include "server/submit_keys.h"

namespace hachi::server {

class JobService : public OnLedger, public Ledger::Observer {
 public:
  // Not owned; all outlive it.
  JobService(Ledger* ledger, Fleet* fleet, AgentHub* hub, const Authorizer* authorizer,
             const ControllerOptions* options);

  // The pending jobs and recent submit keys of the records (at start, before any
  // thread).
  void LoadLocked() REQUIRES(ledger_->mu());

  // Validates (unsatisfiable requests refused with the reason), stores, then returns
  // the new ids: on return they are on disk. A request whose idempotency_key this user
  // already submitted with (SubmitKeys' window) returns that submit's ids and makes
  // nothing; kUnavailable while that first submit is still being stored.
  Result<std::vector<state::JobId>> Submit(const SubmitRequest& request,
                                           const Caller& who) EXCLUDES(ledger_->mu());
  // sbatch --test-only (test_submit.cc): `request` validated as Submit validates it
  // (not the pending bounds, not the idempotency key), then where and when it would
  // start given the cluster and queue now (sched/test_start.h). Nothing is stored.
  // `known` false: the scheduler reserved nothing for it.
  struct TestSubmitAnswer {
    state::JobId job_id = 0;  // the id a submit now would get
    bool known = false;
    Time start = 0;
    std::vector<std::string> nodes;
    int cpus = 0;
    std::string partition;
  };
  Result<TestSubmitAnswer> TestSubmit(const SubmitRequest& request, const Caller& who)
      EXCLUDES(ledger_->mu());
  // Pending: ended as cancelled now. Running: its agents stop it (SIGTERM, grace,
  // SIGKILL) and it ends as cancelled when they report. kNotFound / kInvalidArgument
  // (already ended). Only the job's owner or an admin (Authorizer: kUnauthenticated,
  // kPermissionDenied). As Slurm's scancel: `id` an array's id (its first task's,
  // JobSpec::array_job_id) means every task of it that has not ended, in one commit;
  // `task` >= 0 means task `task` of array `id` alone ("A_T"). Any other id is that
  // one job.
  Status Cancel(state::JobId id, const Caller& who, int task = -1)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // Holds or releases the same way: an array's id is its pending tasks. An
  // administrator's hold is an administrator's unless `user_hold` (scontrol uhold), and
  // only an administrator releases it.
  Status Hold(state::JobId id, bool hold, const Caller& who, int task = -1,
              bool user_hold = false) EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // (job_control.cc) Sends `signal` to a running job's processes through its agents:
  // `scope` (api::SignalScope) every process on every node, its steps' tasks on every
  // node, or its batch shell on its first node; an array's id means its running tasks.
  // kBusy (409) naming the state for a job that does not run. Owner or admin.
  Status Signal(state::JobId id, int signal, api::SignalScope scope, const Caller& who,
                int task = -1) EXCLUDES(ledger_->mu());
  // scontrol requeue: a running job is stopped as by Cancel (SIGTERM, grace, SIGKILL)
  // and goes back to pending with its id when its agents report; a finished one goes
  // back to pending now, its script and environment read back from the store. Either
  // way requeues + 1 (SLURM_RESTART_COUNT). kBusy for a pending job or one being
  // cancelled. An array's id means its tasks that run or ended. Owner or admin.
  Status Requeue(state::JobId id, const Caller& who, int task = -1)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // scontrol update (job_control.cc): a pending job's request changes as `update`
  // says (merged, then validated as a submit's: the same partitions, limits and
  // dependencies), a pending or running job's name and comment. A running job's
  // request does not change (kBusy: its agents enforce it); an ended job is kBusy.
  // Owner or admin; as Slurm's, lengthening a time limit is an admin's
  // (Action::kRaiseTimeLimit), and so are a negative nice and an account or partition
  // the caller may not submit to. A dependency that would make a cycle is refused. An
  // array's id means its pending tasks (its running ones for a name or comment).
  Status Update(state::JobId id, const api::JobUpdate& update, const Caller& who,
                int task = -1) EXCLUDES(ledger_->writer_mu(), ledger_->mu());

  // Ledger::Observer: what each user has pending follows every apply.
  void Applied(const std::vector<state::Edit>& edits) override;

 private:
  // The jobs a cancel/hold/release of `id` (and `task`, Cancel's) means, in id order;
  // `whole_array` says whether `id` named an array. kNotFound.
  Result<std::vector<state::JobId>> TargetsLocked(state::JobId id, int task,
                                                  bool* whole_array) const
      REQUIRES(ledger_->mu());
  // Submit's checks, shared with TestSubmit (sbatch --test-only) so that the two never
  // disagree. Before the lock: who may submit there, the spec, a negative --nice, the
  // array's size.
  Status CheckSubmit(const SubmitRequest& request, const Caller& who) const;
  // The request as the server completes it: the caller's name and default account, a
  // --time=UNLIMITED as the partition's maximum.
  Result<sched::JobRequest> CompleteRequestLocked(const SubmitRequest& request,
                                                  const Caller& who) const
      REQUIRES(ledger_->mu());
  // --time=UNLIMITED: the maximum of `partition` ("" the first), 0 when it has none.
  Duration MaxTimeLocked(const std::string& partition) const REQUIRES(ledger_->mu());
  // Validated against the cluster (with the default memory), its dependencies checked
  // for jobs numbered from `first_id` on.
  Result<sched::Job> ValidateJobLocked(const sched::JobRequest& req,
                                       state::JobId first_id) const
      REQUIRES(ledger_->mu());
  // pending_use_ for job `id` as it is now in the records (absent: gone).
  void TrackPendingLocked(state::JobId id) REQUIRES(ledger_->mu());

  // Constant after construction.
  Fleet* const fleet_;
  AgentHub* const hub_;
  const Authorizer* const authorizer_;
  const ControllerOptions* const options_;

  // What each user has pending, for the bound at submit (ControllerOptions::
  // max_pending_*): jobs, and the payloads they hold, each counted once.
  struct PendingUse {
    int64_t jobs = 0;
    int64_t bytes = 0;
    std::map<const state::JobPayload*, int64_t> payloads;  // -> pending jobs holding it
    int64_t reserved_jobs = 0;  // submits checked, not yet committed
    int64_t reserved_bytes = 0;
  };
  std::unordered_map<std::string, PendingUse> pending_use_ GUARDED_BY(ledger_->mu());
  std::set<state::JobId> pending_counted_ GUARDED_BY(ledger_->mu());  // in pending_use_
  SubmitKeys submit_keys_ GUARDED_BY(ledger_->mu());  // recent submits' idempotency keys
};

}  // namespace hachi::server
