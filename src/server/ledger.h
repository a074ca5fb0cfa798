// Ledger: the one owner of the controller's records — the in-memory StateImage and the
// Store that keeps them on disk — of their two locks, and of the one path by which they
// change: check → commit → apply → notify. Every durable write of the server passes
// here (edits, and the measurements written beside them), so that there is one place
// to reason about what is on disk against what is in memory (and one place where a
// store that fences a deposed writer will refuse it).
//
// The services of the controller (jobs, agents, steps, usage, tokens, the scheduling
// loop) keep their own state beside the records and guard it with the ledger's mu():
// their fields say GUARDED_BY(ledger_.mu()), their methods REQUIRES/EXCLUDES it, and
// clang's -Wthread-safety checks the contract across classes (`make analyze`).
//
// Thread-safety: every public method may be called from any thread; the contract is in
// the declarations. Lock order: writer_mu() → mu() → anything a service or the AgentHub
// locks. Two departures from "one writer", both deliberate (docs/architecture.md §7):
//   - Commit's fsync runs with mu() released, so API reads, agents' polls and submits
//     never wait for the disk; writer_mu(), held by the caller across the whole of
//     Commit, keeps every other writer out, so what was checked is what applies.
//   - CommitNew (submits) takes neither lock across its fsync: it only adds new jobs,
//     which nothing another writer checked depends on, and the store's group commit
//     batches a burst of them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "server/disk_full_log.h"
#include "state/edits.h"
#include "state/records.h"
#include "state/store.h"
#include "state/usage.h"

namespace hachi::server {

// The topic a long poll for job `id` waits on: notified whenever an edit touches the
// job (Ledger::SetNotifier).
std::string JobTopic(state::JobId id);

// The job an edit touches (a submit's new job included); 0 for a node's or a token's.
state::JobId EditJob(const state::Edit& e);

class Ledger {
 public:
  // What one commit writes: the edits, and the usage of the runs they end (a
  // measurement, not an edit: written beside them once they are durable).
  struct Batch {
    std::vector<state::Edit> edits;
    std::vector<state::JobUsage> usage;
  };

  // A service whose state must follow the records. Every hook runs on the committing
  // thread with mu() held (the implementations say so with AssertHeld: clang cannot
  // name another object's lock in a virtual's contract); none may commit.
  class Observer {
   public:
    virtual ~Observer() = default;
    // Before the edits are checked (Commit only): may add edits that must be part of
    // the same commit (a run's steps end with it).
    virtual void Extend(std::vector<state::Edit>* /*edits*/) {}
    // The edits passed their checks and are about to be written (Commit only): may add
    // to `batch` what is written with them, and take it out of its own state.
    virtual void Seal(Batch* /*batch*/) {}
    // The write failed and nothing applied: what Seal took goes back.
    virtual void Aborted(Batch* /*batch*/) {}
    // The edits are durable and applied to the image (Commit and CommitNew alike).
    virtual void Applied(const std::vector<state::Edit>& /*edits*/) {}
  };

  // Loads the records from `store`. Nothing runs yet.
  static Result<std::unique_ptr<Ledger>> Open(std::unique_ptr<state::Store> store);
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // ---- Set up before any thread runs ----
  // Observers are called in the order added.
  void AddObserver(Observer* observer);
  // Long polls parked in the HTTP layer wait on JobTopic(id); `notify` is called with
  // mu() held: it must only queue, never call back. nullptr: none.
  void SetNotifier(std::function<void(const std::string&)> notify) EXCLUDES(mu_);
  // How long each commit took, for hachi_store_commit_seconds.
  void SetCommitObserver(std::function<void(double seconds)> observer);

  // ---- The locks ----
  Mutex& writer_mu() const RETURN_CAPABILITY(writer_mu_) { return writer_mu_; }
  Mutex& mu() const RETURN_CAPABILITY(mu_) { return mu_; }

  // ---- Reading ----
  const state::StateImage& image() const REQUIRES(mu_) { return image_; }
  // The ids of the image's pending and running jobs, kept after every apply: a cycle
  // visits these, not the finished jobs the image keeps.
  const std::set<state::JobId>& active() const REQUIRES(mu_) { return active_; }
  // Notifies JobTopic(id) now (a waiter to wake without an edit: the server stopping).
  void NotifyJob(state::JobId id) const REQUIRES(mu_);

  // ---- Writing ----
  // Ids for `count` new jobs, consecutive, never used before (not even before a
  // restart): the first of them.
  state::JobId ReserveIds(int count) REQUIRES(mu_);
  state::JobId next_id() const REQUIRES(mu_) { return next_id_; }
  // Checks `edits` against the image (with what the observers add), makes them durable
  // (mu() released across the fsync; writer_mu() keeps other writers out), then
  // applies them and tells the observers. Nothing applies on error. Callers must not
  // keep pointers into their own mu()-guarded maps across it.
  Status Commit(std::vector<state::Edit> edits) REQUIRES(writer_mu_, mu_);
  // New jobs (JobSubmitted edits with ids from ReserveIds): durable without either lock
  // held across the fsync, then `settle(committed)` runs under mu() (the caller's
  // bookkeeping of what it reserved), then, when committed, they apply.
  Status CommitNew(const std::vector<state::Edit>& edits,
                   const std::function<void(bool committed)>& settle) EXCLUDES(mu_);

  // ---- Beside the records (measurements and payloads the image does not hold) ----
  // Thread-safe; they read or write the disk, so callers do not hold mu() for them but
  // at start, before any thread runs.
  Status SaveUsage(const std::vector<state::JobUsage>& usage);
  Result<std::vector<state::JobUsage>> LoadUsage(state::JobId id);
  Status SavePowerSpells(const std::vector<state::PowerSpell>& spells);
  Result<std::vector<state::PowerSpell>> LoadPowerSpells(Time from, Time to);
  Result<std::shared_ptr<const state::JobPayload>> LoadPayload(state::JobId id);

  // A finished job's script and environment back in memory as the store has them
  // (LoadPayload), before an edit that makes it pending again: memory was compacted,
  // the records are unchanged.
  void RestorePayload(state::JobId id, std::shared_ptr<const state::JobPayload> payload)
      REQUIRES(mu_);
  // Bytes of finished jobs' environments dropped since the last call (the loop gives
  // memory back to the system past a bound).
  int64_t TakeFreedBytes() REQUIRES(mu_);

 private:
  explicit Ledger(std::unique_ptr<state::Store> store);
  // After an apply: active_, the finished jobs' memory, the job topics, the observers.
  void AppliedLocked(const std::vector<state::Edit>& edits) REQUIRES(mu_);
  // Memory: a finished job's environment is dropped; the tasks of an array keep
  // sharing one payload (its script).
  void CompactFinishedLocked(state::JobRecord* job) REQUIRES(mu_);

  // Constant after construction. Thread-safe itself (its group commit batches
  // concurrent submits). Every commit but a submit's is made under writer_mu_, so edits
  // reach the disk in the order they apply here.
  const std::unique_ptr<state::Store> store_;
  // Every write's outcome: a full disk is said once per episode. Thread-safe itself.
  DiskFullLog disk_full_log_;
  // Set before any thread runs.
  std::vector<Observer*> observers_;

  // One writer at a time: held from an edit's check to its apply, across the commit.
  mutable Mutex writer_mu_ ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  state::StateImage image_ GUARDED_BY(mu_);
  std::set<state::JobId> active_ GUARDED_BY(mu_);
  state::JobId next_id_ GUARDED_BY(mu_) = 1;
  // Per array, the payload its finished tasks share once their environment is dropped.
  std::unordered_map<state::JobId, std::shared_ptr<const state::JobPayload>> compacted_
      GUARDED_BY(mu_);
  int64_t freed_bytes_ GUARDED_BY(mu_) = 0;
  std::function<void(const std::string&)> notify_ GUARDED_BY(mu_);
};

// What every service standing on the ledger shares: the ledger, and the bridge that
// tells clang's analysis that a caller's lock, which it knows by the caller's own name
// for the ledger, is the one this service's REQUIRES(ledger_->mu()) means. (The
// analysis cannot see that two pointers to one ledger are one.)
class OnLedger {
 public:
  // The caller holds `ledger`'s mu() (checked by the analysis at the call) and `ledger`
  // is the one this service stands on (checked here); from the call on, the analysis
  // takes this service's ledger_->mu() as held.
  void Held(const Ledger* ledger) const REQUIRES(ledger->mu())
      ASSERT_CAPABILITY(ledger_->mu()) {
    Same(ledger);
  }
  // The same for writer_mu().
  void WriterHeld(Ledger* ledger) const REQUIRES(ledger->writer_mu())
      ASSERT_CAPABILITY(ledger_->writer_mu()) {
    Same(ledger);
  }

 protected:
  explicit OnLedger(Ledger* ledger) : ledger_(ledger) {}
  // Constant after construction; the ledger outlives the service.
  Ledger* const ledger_;

 private:
  void Same(const Ledger* ledger) const;
};

}  // namespace hachi::server
