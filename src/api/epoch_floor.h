// EpochFloor: the highest leader epoch a process has seen (docs/ha.md). Every reply of a
// leader carries its epoch (X-Hachi-Epoch, api/ha_headers.h); a reply with a lower one
// comes from a deposed leader that does not know it yet, and is refused, so its
// launches, kills and signals never reach a job. An agent keeps its floor in a file
// (<spool>/epoch), so a restarted agent still refuses the deposed leader.
//
// Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/mutex.h"
#include "core/status.h"

namespace hachi::api {

class EpochFloor {
 public:
  // `path`: where the floor is kept ("" = in memory only); read now when it exists. A
  // file that does not hold a number is an error naming it.
  static Result<std::shared_ptr<EpochFloor>> Open(const std::string& path);

  int64_t value() const EXCLUDES(mu_);
  // False when `epoch` is below the floor (a deposed leader's); otherwise raises the
  // floor to it (writing the file when it rises: temporary file, fsync, rename) and
  // returns true. A write that fails keeps the floor in memory.
  bool Admit(int64_t epoch) EXCLUDES(mu_);

 private:
  explicit EpochFloor(std::string path, int64_t value)
      : path_(std::move(path)), value_(value) {}

  const std::string path_;
  mutable Mutex mu_;
  int64_t value_ GUARDED_BY(mu_);
};

}  // namespace hachi::api
