// SubmitKeys: the idempotency keys of recent submits, so that a submit the
// CLI retries after its reply was lost (`cannot reach the server`) gets the job ids of
// the first instead of a duplicate. A key is the client's (random per submit, made by
// the CLI) and counts per uid: another user's key is another key.
//
// Durable through the job records: each job keeps its submit's key
// (state::JobRecord::submit_key), and the Controller rebuilds this index from them at
// start (Load). Bounded: keys older than the window, or beyond the most recent
// `max_keys`, are forgotten (a retry comes within seconds, not days).
//
// Thread-safety: none; the Controller guards it with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "core/time.h"
#include "state/records.h"

namespace hachi::server {

class SubmitKeys {
 public:
  struct Entry {
    state::JobId first = 0;  // the submit's first job id; tasks follow it
    int count = 0;           // jobs the submit made (array tasks)
    Time at = 0;             // when it was submitted
    bool stored = false;     // on disk; false while its commit is under way
  };

  static constexpr Duration kWindow = 24 * 3600;
  explicit SubmitKeys(size_t max_keys = 100000) : max_keys_(max_keys) {}

  // The entry of `key` for `uid`, or nullptr; forgets what fell out of the window.
  const Entry* Find(uint32_t uid, const std::string& key, Time now);
  // A submit's key taken before its commit (stored = false), so that a retry arriving
  // meanwhile is told to wait instead of making a second job.
  void Reserve(uint32_t uid, const std::string& key, state::JobId first, int count,
               Time now);
  void Stored(uint32_t uid, const std::string& key);
  void Forget(uint32_t uid, const std::string& key);  // the commit failed
  // From a job record at start: the job joins its submit's entry (stored).
  void Load(uint32_t uid, const std::string& key, state::JobId id, Time at, Time now);

  size_t size() const { return entries_.size(); }

 private:
  using Key = std::pair<uint32_t, std::string>;
  void Evict(Time now);

  size_t max_keys_;
  std::map<Key, Entry> entries_;
  std::deque<std::pair<Time, Key>> order_;  // submit order, for the window and the cap
};

}  // namespace hachi::server
