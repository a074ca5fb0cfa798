#include "server/ledger.h"

#include <malloc.h>

#include <cstdlib>
#include <iostream>
#include <type_traits>
#include <variant>

namespace hachi::server {

std::string JobTopic(state::JobId id) { return "job/" + std::to_string(id); }

state::JobId EditJob(const state::Edit& e) {
  return std::visit(
      [](const auto& x) -> state::JobId {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, state::JobSubmitted>) {
          return x.record.id;
        } else if constexpr (requires { x.id; }) {
          return x.id;
        } else {
          return 0;
        }
      },
      e);
}

Ledger::Ledger(std::unique_ptr<state::Store> store)
    : store_(std::move(store)), disk_full_log_(store_->path()) {}

Ledger::~Ledger() = default;

Result<std::unique_ptr<Ledger>> Ledger::Open(std::unique_ptr<state::Store> store) {
  Result<state::StateImage> image = store->Load();
  if (!image.ok()) return image.status();
  std::unique_ptr<Ledger> l(new Ledger(std::move(store)));
  MutexLock lock(&l->mu_);  // nothing else runs yet: taken so the analysis sees it
  l->image_ = std::move(*image);
  l->next_id_ = l->image_.last_job_id + 1;
  for (auto& [id, job] : l->image_.jobs) {
    if (state::IsFinal(job.state)) {
      l->CompactFinishedLocked(&job);
    } else {
      l->active_.insert(id);
    }
  }
  l->freed_bytes_ = 0;
  malloc_trim(0);  // what the load's JSON and the dropped environments left
  return l;
}

void Ledger::AddObserver(Observer* observer) { observers_.push_back(observer); }

void Ledger::SetNotifier(std::function<void(const std::string&)> notify) {
  MutexLock lock(&mu_);
  notify_ = std::move(notify);
}

void Ledger::SetCommitObserver(std::function<void(double seconds)> observer) {
  store_->SetCommitObserver(std::move(observer));
}

void Ledger::NotifyJob(state::JobId id) const {
  if (notify_) notify_(JobTopic(id));
}

state::JobId Ledger::ReserveIds(int count) {
  const state::JobId first = next_id_;
  next_id_ += count;
  return first;
}

Status Ledger::Commit(std::vector<state::Edit> edits) {
  if (edits.empty()) return Status::Ok();
  for (Observer* o : observers_) o->Extend(&edits);
  // Check first, so what goes to disk is what applies here. The edits of one batch
  // concern different jobs and nodes, so each is checked against the image as it is.
  for (const state::Edit& e : edits) HACHI_RETURN_IF_ERROR(state::CheckEdit(image_, e));
  Batch batch{std::move(edits), {}};
  for (Observer* o : observers_) o->Seal(&batch);
  // The fsync without mu_: writer_mu_, which the caller holds, keeps every other
  // writer out (the header says why that is enough).
  mu_.Unlock();
  const Status committed = store_->Commit(batch.edits);
  disk_full_log_.Note(committed);
  Status usage_saved = Status::Ok();
  if (committed.ok() && !batch.usage.empty()) {
    usage_saved = store_->SaveUsage(batch.usage);
    disk_full_log_.Note(usage_saved);
  }
  mu_.Lock();
  if (!usage_saved.ok()) {
    std::cerr << "hachi server: the usage of " << batch.usage.size()
              << " ended runs was not written: " << usage_saved.message() << "\n";
  }
  if (!committed.ok()) {
    for (Observer* o : observers_) o->Aborted(&batch);
    return committed;
  }
  for (const state::Edit& e : batch.edits) {
    Status s = state::ApplyEdit(&image_, e);
    (void)s;  // checked above, and writer_mu_ kept every other writer out since
  }
  AppliedLocked(batch.edits);
  return Status::Ok();
}

Status Ledger::CommitNew(const std::vector<state::Edit>& edits,
                         const std::function<void(bool committed)>& settle) {
  // Outside both locks: concurrent submits share one transaction (group commit).
  const Status committed = store_->Commit(edits);
  disk_full_log_.Note(committed);
  MutexLock lock(&mu_);
  settle(committed.ok());
  if (!committed.ok()) return committed;
  for (const state::Edit& e : edits) {
    Status s = state::ApplyEdit(&image_, e);
    (void)s;  // new ids, reserved by ReserveIds: cannot clash
  }
  AppliedLocked(edits);
  return Status::Ok();
}

void Ledger::AppliedLocked(const std::vector<state::Edit>& edits) {
  std::vector<state::JobId> ended;
  for (const state::Edit& e : edits) {
    const state::JobId id = EditJob(e);
    if (id == 0) continue;
    NotifyJob(id);  // a `hachi run` waiting for it
    auto it = image_.jobs.find(id);
    if (it != image_.jobs.end() && !state::IsFinal(it->second.state)) {
      active_.insert(id);
    } else {
      active_.erase(id);
      ended.push_back(id);
    }
  }
  // The observers before the compaction: they may count a pending job's payload by its
  // address (what the owner may have pending), which the compaction replaces.
  for (Observer* o : observers_) o->Applied(edits);
  for (state::JobId id : ended) {
    if (auto it = image_.jobs.find(id); it != image_.jobs.end()) {
      CompactFinishedLocked(&it->second);
    }
  }
}

// A job that has ended keeps its environment in the store only: it was what its run
// needed, and it is most of a record's memory (the submitter's whole environment, 1-4 KB
// a job, as sbatch's --export=ALL), which the server would otherwise hold for every job
// it ever ran. (The batch script and the arguments stay: `show job` and sacct show
// them.)
//
// An array's tasks share one payload: dropping each task's environment by copying its
// script and arguments would make one copy per task. They share the payload without
// environment instead (compacted_, per array); the full one goes with the last task
// that held it.
void Ledger::CompactFinishedLocked(state::JobRecord* job) {
  state::JobSpec& spec = job->spec;
  if (spec.payload == nullptr || spec.env().empty()) return;
  if (spec.payload.use_count() == 1) freed_bytes_ += spec.payload->bytes();
  if (spec.array_job_id == 0) {
    spec.SetPayload({.script = spec.script(), .env = {}, .argv = spec.argv()});
    return;
  }
  // The tasks of one array all have the same script and arguments (the submit's).
  std::shared_ptr<const state::JobPayload>& shared = compacted_[spec.array_job_id];
  if (shared == nullptr) {
    shared = std::make_shared<const state::JobPayload>(
        state::JobPayload{.script = spec.script(), .env = {}, .argv = spec.argv()});
  }
  spec.payload = shared;
}

void Ledger::RestorePayload(state::JobId id,
                            std::shared_ptr<const state::JobPayload> payload) {
  if (auto it = image_.jobs.find(id); it != image_.jobs.end()) {
    it->second.spec.payload = std::move(payload);
  }
}

int64_t Ledger::TakeFreedBytes() {
  const int64_t freed = freed_bytes_;
  freed_bytes_ = 0;
  return freed;
}

Status Ledger::SaveUsage(const std::vector<state::JobUsage>& usage) {
  Status saved = store_->SaveUsage(usage);
  disk_full_log_.Note(saved);
  return saved;
}

Result<std::vector<state::JobUsage>> Ledger::LoadUsage(state::JobId id) {
  return store_->LoadUsage(id);
}

Status Ledger::SavePowerSpells(const std::vector<state::PowerSpell>& spells) {
  Status saved = store_->SavePowerSpells(spells);
  disk_full_log_.Note(saved);
  return saved;
}

Result<std::vector<state::PowerSpell>> Ledger::LoadPowerSpells(Time from, Time to) {
  return store_->LoadPowerSpells(from, to);
}

Result<std::shared_ptr<const state::JobPayload>> Ledger::LoadPayload(state::JobId id) {
  return store_->LoadPayload(id);
}

void OnLedger::Same(const Ledger* ledger) const {
  if (ledger != ledger_) {  // a wiring bug: the lock held is not this service's
    std::cerr << "hachi server: a service was called under another ledger's lock\n";
    std::abort();
  }
}

}  // namespace hachi::server
