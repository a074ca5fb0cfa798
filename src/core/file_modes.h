// The modes of what a daemon keeps on disk (docs/storage.md "Who can read
// it"). The server's state directory holds every job's script and environment (the
// database) and the cluster secret; an agent's spool holds scripts and exit files. Local
// users must not read them, nor hold an open descriptor on them from a moment they were
// wider. These helpers create a directory or file with its mode from the start, and at
// each start narrow one found wider (saying so), or refuse one that is not the daemon's.
//
// Free functions; thread-compatible (umask is process-wide: ScopedUmask only before the
// daemon starts threads that create files).
#pragma once

#include <sys/types.h>

#include <ostream>
#include <string>

#include "core/status.h"

namespace hachi {

// The directory `dir`, created when missing (missing parents 0755, `dir` itself with
// `mode`), else checked: a directory (a symlink to one is followed) owned by this
// process's effective uid; mode bits beyond `mode` are removed and `warn` told. Another
// owner: kPermissionDenied; not a directory: kInvalidArgument; both name the path.
Status EnsurePrivateDir(const std::string& dir, mode_t mode, std::ostream& warn);

// The file `path` when it exists: a regular file (not a symlink) owned by this process's
// effective uid, narrowed to `mode` (with a line to `warn`) when wider. Absent: Ok.
Status CheckPrivateFile(const std::string& path, mode_t mode, std::ostream& warn);

// A secret the admin placed (the TLS key): kPermissionDenied naming `what` and the mode
// when every local user may read it. Group bits are the admin's choice (Debian's
// ssl-cert group). "" : Ok.
Status CheckNotWorldReadable(const std::string& path, const std::string& what);

// umask(mask) for its lifetime: files a library creates by itself (SQLite's database,
// whose mode its -wal and -shm copy) get no group or other bits from their first byte.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask);
  ~ScopedUmask();
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

}  // namespace hachi
