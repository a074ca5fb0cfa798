// NewMemoryStore (store.h): the Store contract with nothing on disk. Each Commit
// applies its batch to a scratch image holding copies of just the records it touches,
// and merges them back only when every edit applied, so a refused batch leaves nothing
// behind, as in the SQLite store, and a commit costs the same with 100,000 jobs.
#include <atomic>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/mutex.h"
#include "state/store.h"

namespace hachi::state {
namespace {

// Copies the record `edit` touches, if it exists, from `image` into `scratch`.
void CopyTouched(const StateImage& image, const Edit& edit, StateImage* scratch) {
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, TokenIssued> || std::is_same_v<E, TokenRevoked>) {
          // Tokens are few, and checked against all of them: copied whole by Commit.
        } else if constexpr (std::is_same_v<E, StepStarted>) {
          // Its job, and the run's last step: what its number is checked against.
          const StepRecord& r = e.record;
          if (auto it = image.jobs.find(r.job); it != image.jobs.end()) {
            scratch->jobs.insert(*it);  // no-op when an earlier edit copied it
          }
          const int next = NextStepNumber(image, r.job, r.job_start);
          if (next > 0) {
            scratch->steps.insert(*image.steps.find({r.job, r.job_start, next - 1}));
          }
        } else if constexpr (std::is_same_v<E, StepEnded>) {
          if (auto it = image.steps.find(e.key); it != image.steps.end()) {
            scratch->steps.insert(*it);
          }
        } else if constexpr (std::is_same_v<E, NodeUpserted> ||
                             std::is_same_v<E, NodeStateChanged> ||
                             std::is_same_v<E, NodeHealthChanged> ||
                             std::is_same_v<E, NodeBurnInChanged>) {
          const std::string& name = [&]() -> const std::string& {
            if constexpr (std::is_same_v<E, NodeUpserted>) {
              return e.record.name;
            } else {
              return e.name;
            }
          }();
          if (scratch->nodes.count(name) != 0) return;
          auto it = image.nodes.find(name);
          if (it != image.nodes.end()) scratch->nodes.insert(*it);
        } else {
          JobId id;
          if constexpr (std::is_same_v<E, JobSubmitted>) {
            id = e.record.id;
          } else {
            id = e.id;
          }
          if (scratch->jobs.count(id) != 0) return;
          auto it = image.jobs.find(id);
          if (it != image.jobs.end()) scratch->jobs.insert(*it);
        }
      },
      edit);
}

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(int fail_after) : fail_after_(fail_after) {}

  Result<std::shared_ptr<const JobPayload>> LoadPayload(JobId id) override {
    MutexLock lock(&mu_);
    auto it = image_.jobs.find(id);
    if (it == image_.jobs.end()) return NotFound("no job " + std::to_string(id));
    return it->second.spec.payload;
  }
  Status SaveUsage(const std::vector<JobUsage>& usage) override {
    MutexLock lock(&mu_);
    if (fail_after_ >= 0 && succeeded_ >= fail_after_) {
      return Unavailable("memory store: injected failure after " +
                         std::to_string(fail_after_) + " commits");
    }
    for (const JobUsage& u : usage) usage_[{u.job, u.start_time}] = u;
    return Status::Ok();
  }
  Result<std::vector<JobUsage>> LoadUsage(JobId job) override {
    MutexLock lock(&mu_);
    std::vector<JobUsage> out;
    for (auto it = usage_.lower_bound({job, std::numeric_limits<Time>::min()});
         it != usage_.end() && it->first.first == job; ++it) {
      out.push_back(it->second);
    }
    return out;
  }
  Status SavePowerSpells(const std::vector<PowerSpell>& spells) override {
    MutexLock lock(&mu_);
    if (fail_after_ >= 0 && succeeded_ >= fail_after_) {
      return Unavailable("memory store: injected failure after " +
                         std::to_string(fail_after_) + " commits");
    }
    for (const PowerSpell& p : spells) power_[{p.since, p.node}] = p;
    return Status::Ok();
  }
  Result<std::vector<PowerSpell>> LoadPowerSpells(Time from, Time to) override {
    MutexLock lock(&mu_);
    std::vector<PowerSpell> out;
    for (const auto& [key, p] : power_) {
      if (p.since < to && (p.until > from || p.open)) out.push_back(p);
    }
    return out;
  }
  Result<StateImage> Load() override {
    MutexLock lock(&mu_);
    return image_;
  }

  Status Commit(const std::vector<Edit>& edits) override {
    commits_.fetch_add(1, std::memory_order_relaxed);
    std::optional<CommitTimer> timer;  // as the SQLite store: non-empty commits only
    if (!edits.empty()) timer.emplace(this);
    MutexLock lock(&mu_);
    if (fail_after_ >= 0 && succeeded_ >= fail_after_) {
      return Unavailable("memory store: injected failure after " +
                         std::to_string(fail_after_) + " commits");
    }
    transactions_.fetch_add(1, std::memory_order_relaxed);
    StateImage scratch;
    scratch.last_job_id = image_.last_job_id;
    scratch.tokens = image_.tokens;
    for (const Edit& edit : edits) {
      CopyTouched(image_, edit, &scratch);
      HACHI_RETURN_IF_ERROR(ApplyEdit(&scratch, edit));
    }
    for (auto& [id, job] : scratch.jobs) image_.jobs[id] = std::move(job);
    for (auto& [name, node] : scratch.nodes) image_.nodes[name] = std::move(node);
    for (auto& [key, step] : scratch.steps) image_.steps[key] = std::move(step);
    image_.last_job_id = scratch.last_job_id;
    image_.tokens = std::move(scratch.tokens);
    ++succeeded_;
    return Status::Ok();
  }

  StoreStats stats() const override {
    return StoreStats{commits_.load(std::memory_order_relaxed),
                      transactions_.load(std::memory_order_relaxed)};
  }

 private:
  const int fail_after_;  // constant after construction

  Mutex mu_;
  StateImage image_ GUARDED_BY(mu_);
  std::map<std::pair<JobId, Time>, JobUsage> usage_ GUARDED_BY(mu_);
  std::map<std::pair<Time, std::string>, PowerSpell> power_ GUARDED_BY(mu_);  // by start
  int succeeded_ GUARDED_BY(mu_) = 0;

  std::atomic<int64_t> commits_{0};
  std::atomic<int64_t> transactions_{0};
};

}  // namespace

std::unique_ptr<Store> NewMemoryStore(int fail_after) {
  return std::make_unique<MemoryStore>(fail_after);
}

}  // namespace hachi::state
