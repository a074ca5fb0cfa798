#include "sched/fair_share.h"

#include <algorithm>
#include <cmath>

namespace hachi::sched {

std::vector<FairShareAccount> FairShareFactors(const FairShare& fs) {
  std::vector<FairShareAccount> out;
  double share_sum = 0, usage_sum = 0;
  for (const auto& [k, v] : fs.shares) share_sum += v;
  for (const auto& [k, v] : fs.usage) usage_sum += v;
  if (share_sum <= 0) return out;
  out.reserve(fs.shares.size());
  for (const auto& [account, share] : fs.shares) {
    FairShareAccount a;
    a.account = account;
    a.shares = share;
    a.norm_shares = share / share_sum;
    auto it = fs.usage.find(account);
    a.usage = it == fs.usage.end() ? 0 : it->second;
    a.norm_usage = usage_sum > 0 ? a.usage / usage_sum : 0;
    a.factor = a.norm_shares > 0
                   ? std::round(std::exp2(-a.norm_usage / a.norm_shares) * 128) / 128
                   : 0;
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(),
            [](const FairShareAccount& x, const FairShareAccount& y) {
              return x.account < y.account;
            });
  return out;
}

double FactorOf(const std::vector<FairShareAccount>& factors,
                const std::string& account) {
  if (factors.empty()) return 1.0;
  auto it = std::lower_bound(
      factors.begin(), factors.end(), account,
      [](const FairShareAccount& e, const std::string& a) { return e.account < a; });
  return it != factors.end() && it->account == account ? it->factor : 0.0;
}

int DecayedUsage::Index(const std::string& key) {
  auto [it, added] = index_.emplace(key, static_cast<int>(keys_.size()));
  if (added) {
    keys_.push_back(key);
    usage_.push_back(0);
    running_.push_back(0);
  }
  return it->second;
}

int DecayedUsage::Find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? -1 : it->second;
}

void DecayedUsage::AddPast(int key, int gpus, Time start, Time end) {
  end = std::min(end, now_);
  if (half_life_ <= 0 || gpus <= 0 || end <= start) return;
  // ∫ g·2^(−(now − τ)/H) dτ over [start, end].
  const double h = half_life_;
  usage_[key] += gpus * h / std::log(2.0) *
                 (std::exp2(-static_cast<double>(now_ - end) / h) -
                  std::exp2(-static_cast<double>(now_ - start) / h));
}

void DecayedUsage::AdvanceTo(Time now) {
  if (now <= now_) return;
  if (half_life_ > 0) {
    const double d = std::exp2(-static_cast<double>(now - now_) / half_life_);
    const double gain = half_life_ / std::log(2.0) * (1 - d);
    for (size_t i = 0; i < usage_.size(); ++i) {
      usage_[i] = usage_[i] * d + running_[i] * gain;
    }
  }
  now_ = now;
}

}  // namespace hachi::sched
