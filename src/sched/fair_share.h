// Fair share (docs/scheduler.md, "Priority"): each account's factor 2^(-usage/share),
// and the decayed GPU-seconds that are its usage. The scheduler's order, the server's
// meter, `hachi sim` and `sshare` all read these, so what is shown is what is used.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/time.h"
#include "sched/cluster.h"

namespace hachi::sched {

// One account's figures, shares and usage normalised over all accounts (usage over
// every account that has any, with a share or not).
struct FairShareAccount {
  std::string account;
  double shares = 0;       // as configured
  double norm_shares = 0;  // shares / all shares
  double usage = 0;        // decayed GPU-seconds
  double norm_usage = 0;   // usage / all usage
  double factor = 0;       // 2^(-norm_usage / norm_shares), rounded to 1/128
};

// The factor of every account with a share, ascending by account. Empty when no shares
// are configured: then every account's factor is 1 (FactorOf). The factor is rounded to
// 1/128: usage drifts every second, and the rounding keeps the queue's order (and its
// memo) until a factor moves by a visible step.
std::vector<FairShareAccount> FairShareFactors(const FairShare& fs);
// `account`'s factor in `factors` (FairShareFactors): 1 when there are none, 0 for an
// account without a share when others have one.
double FactorOf(const std::vector<FairShareAccount>& factors, const std::string& account);

// Decayed GPU-seconds per key (an account, or an account's user), advanced lazily:
// between two events each key's running GPU count g is constant, so
//   usage(t) = usage(t0)·d + g·H/ln2·(1 − d),  d = 2^(−(t − t0)/H),
// is exact and costs one exp2 per advance for all keys. Half-life H <= 0: no decay is
// defined, and usage stays 0. Not thread-safe (a value owned by one caller).
class DecayedUsage {
 public:
  explicit DecayedUsage(Duration half_life)
      : half_life_(static_cast<double>(half_life)) {}

  // The index of `key`, added (usage 0, nothing running) when new.
  int Index(const std::string& key);
  // -1 when `key` was never added.
  int Find(const std::string& key) const;
  // `gpus` more (or, negative, fewer) GPUs running for `key` from now().
  void AddRunning(int key, int gpus) { running_[key] += gpus; }
  // A run of `gpus` over [start, end] that is not running in this meter, decayed to
  // now(): a run that ended before the meter started, or the part of a running one
  // before now(). Clipped to now().
  void AddPast(int key, int gpus, Time start, Time end);
  // Moves now() forward (never back).
  void AdvanceTo(Time now);

  Time now() const { return now_; }
  size_t size() const { return keys_.size(); }
  const std::string& key(int i) const { return keys_[i]; }
  double usage(int i) const { return usage_[i]; }
  int running(int i) const { return running_[i]; }

 private:
  double half_life_;
  std::unordered_map<std::string, int> index_;
  std::vector<std::string> keys_;
  std::vector<double> usage_;
  std::vector<int> running_;
  Time now_ = 0;
};

}  // namespace hachi::sched
