// EpochFloor: the highest leader epoch a process has seen (docs/ha.md). Every reply of a
// leader carries its epoch (X-Hachi-Epoch, api/ha_headers.h); a reply with a lower one
// comes from a deposed leader that does not know it yet, and is refused, so its
// launches, kills and signals never reach a job. An agent keeps its floor in a file
// (<spool>/epoch), so a restarted agent still refuses the deposed leader.
//
// Thread-safety: every method may be called from any thread. mu_ guards the floor;
// file_mu_ orders the file's writes, which run outside mu_ (a reader of the floor never
// waits for an fsync).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/mutex.h"
#include "core/status.h"

namespace hachi::api {

class EpochFloor {
 public:
  // Told once per rise, by the caller whose reply raised the floor: the new epoch and
  // the address that answered with it (an agent logs whom it follows now).
  using RiseObserver = std::function<void(int64_t epoch, const std::string& from)>;

  // `path`: where the floor is kept ("" = in memory only); read now when it exists. A
  // file that does not hold a number is an error naming it.
  static Result<std::shared_ptr<EpochFloor>> Open(const std::string& path);

  int64_t value() const EXCLUDES(mu_);
  // False when `epoch` is below the floor (a deposed leader's); otherwise raises the
  // floor to it (writing the file when it rises: temporary file, fsync, rename, fsync of
  // the directory) and returns true. A write that fails keeps the floor in memory.
  // `from`: the address that answered, for the observer.
  bool Admit(int64_t epoch, const std::string& from = "") EXCLUDES(mu_, file_mu_);
  void SetRiseObserver(RiseObserver observer) EXCLUDES(mu_);

 private:
  explicit EpochFloor(std::string path, int64_t value)
      : path_(std::move(path)), value_(value) {}
  void Persist() EXCLUDES(mu_, file_mu_);

  const std::string path_;
  mutable Mutex mu_;
  int64_t value_ GUARDED_BY(mu_);
  RiseObserver observer_ GUARDED_BY(mu_);
  Mutex file_mu_ ACQUIRED_BEFORE(mu_);
};

}  // namespace hachi::api
