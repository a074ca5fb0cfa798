#include "server/submit_keys.h"

#include <algorithm>

namespace hachi::server {

const SubmitKeys::Entry* SubmitKeys::Find(uint32_t uid, const std::string& key,
                                          Time now) {
  Evict(now);
  auto it = entries_.find(Key{uid, key});
  return it == entries_.end() ? nullptr : &it->second;
}

void SubmitKeys::Reserve(uint32_t uid, const std::string& key, state::JobId first,
                         int count, Time now) {
  Key k{uid, key};
  entries_[k] = Entry{first, count, now, false};
  order_.emplace_back(now, std::move(k));
  Evict(now);
}

void SubmitKeys::Stored(uint32_t uid, const std::string& key) {
  auto it = entries_.find(Key{uid, key});
  if (it != entries_.end()) it->second.stored = true;
}

void SubmitKeys::Forget(uint32_t uid, const std::string& key) {
  entries_.erase(Key{uid, key});  // its order_ entry goes when it reaches the front
}

void SubmitKeys::Load(uint32_t uid, const std::string& key, state::JobId id, Time at,
                      Time now) {
  if (at + kWindow <= now) return;
  Key k{uid, key};
  auto [it, added] = entries_.try_emplace(k, Entry{id, 0, at, true});
  Entry& e = it->second;
  if (!added && id < e.first) {
    e.count += static_cast<int>(e.first - id);
    e.first = id;
  }
  e.count = std::max<int>(e.count, static_cast<int>(id - e.first) + 1);
  if (added) order_.emplace_back(at, std::move(k));
  // Records load in id order, which is submit order: order_ stays sorted by time.
  Evict(now);
}

void SubmitKeys::Evict(Time now) {
  while (!order_.empty() &&
         (order_.front().first + kWindow <= now || order_.size() > max_keys_)) {
    auto it = entries_.find(order_.front().second);
    // A key reserved again later has a newer entry; only its own time removes it.
    if (it != entries_.end() && it->second.at == order_.front().first) entries_.erase(it);
    order_.pop_front();
  }
}

}  // namespace hachi::server
