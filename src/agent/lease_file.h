// The node's lease file: until when the runs on this node may go on without word from
// their agent. The agent (LeaseFile) writes it as it holds its lease from the server;
// every job waiter (waiter.h) reads it through a descriptor it inherited, and stops its
// job when the deadline has passed, so that a run whose agent died is stopped by the
// time the server's fence lets the job start elsewhere (docs/fencing.md).
//
// The file is one fixed 40-byte record at offset 0: a magic word, the deadline and the
// time it was written (both absolute CLOCK_MONOTONIC milliseconds, which the agent and
// its waiters share: same boot, same time namespace), a tag of the boot, and a checksum
// of the rest. A write is one pwrite of the whole record. Linux does not promise that a
// read racing that write sees all of it or none (a page-cache copy can tear), so the
// reader checks the checksum and reads again; a record that stays torn, a short file
// or a deadline of 0 all read as "no lease". Never renamed: the waiters hold a
// descriptor opened before they dropped privileges.
//
// No lease means never stop: an agent of an older version, a `hachi dev` embedding that
// sets none, and an agent before its first HoldFor. A new file (or one left from an
// earlier boot) starts at 0 and becomes active on the first HoldFor; a restarted agent
// keeps the deadline its predecessor wrote in this boot, so the runs it adopts stay
// under the same lease.
//
// Thread-safety: LeaseFile's methods may be called from any thread (one mutex orders
// the writes); LeaseDeadlineMs and ReadLease are plain reads of a descriptor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"

namespace hachi::agent {

// Its name in the launcher's spool.
inline constexpr char kLeaseFileName[] = "lease";

class LeaseFile {
 public:
  // Opens or creates `path` (0600, this process's; an existing file of another owner, or
  // not a regular file, is refused). `clock` must read CLOCK_MONOTONIC (RealClock) for
  // the waiters to understand it; tests give a FakeClock to check what is written. Not
  // owned; outlives the LeaseFile.
  static Result<std::unique_ptr<LeaseFile>> Open(const std::string& path,
                                                 const Clock* clock = RealClock());
  ~LeaseFile();
  LeaseFile(const LeaseFile&) = delete;
  LeaseFile& operator=(const LeaseFile&) = delete;

  // A read-only descriptor of the file, close-on-exec: what the launcher hands each
  // job waiter (read-only, so that a waiter -- which runs as the job's user -- could not
  // extend its own lease).
  int fd() const { return read_fd_; }

  // The runs on this node may go on until `ms` from now (ms < 0 counts as 0). Never
  // moves the deadline back: waiters asleep until the old one would not see it.
  Status HoldFor(int64_t ms) EXCLUDES(mu_);

  // The deadline written last (CLOCK_MONOTONIC ms), 0 for none.
  int64_t deadline_ms() const EXCLUDES(mu_);

 private:
  LeaseFile(std::string path, int write_fd, int read_fd, const Clock* clock,
            uint64_t boot, int64_t deadline_ms);

  // Constant after construction.
  const std::string path_;
  const int write_fd_;
  const int read_fd_;
  const Clock* const clock_;
  const uint64_t boot_;

  mutable Mutex mu_;
  int64_t deadline_ms_ GUARDED_BY(mu_);
};

// What a waiter reads: the deadline and when the agent wrote it (CLOCK_MONOTONIC ms).
struct LeaseView {
  int64_t deadline_ms = 0;
  int64_t held_at_ms = 0;
};

// nullopt for no lease: a deadline of 0, a short or unreadable file, a record that
// stays torn over a few reads.
std::optional<LeaseView> ReadLease(int fd);
inline std::optional<int64_t> LeaseDeadlineMs(int fd) {
  std::optional<LeaseView> v = ReadLease(fd);
  if (!v) return std::nullopt;
  return v->deadline_ms;
}

}  // namespace hachi::agent
