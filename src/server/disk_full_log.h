// DiskFullLog: what the server's log says of a full disk under its state store. The
// store refuses writes for lack of space (each caller gets kUnavailable: the submit is
// refused, the start not dispatched); the log says so once, when the first write fails
// for lack of space — with the store's file and the free space left on its file
// system — and once more when a write succeeds again, with how many failed meanwhile
// (lack of space or not). Nothing in between: a server that tries to commit many times
// a second would otherwise fill the disk's neighbours' logs as well.
//
// Thread-safety: Note may be called from any thread at once (the ledger's writer and
// the submits' group commits); one mutex orders the episode and its lines. A leaf lock:
// the ledger calls Note with its own locks released.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/mutex.h"
#include "core/status.h"

namespace hachi::server {

class DiskFullLog {
 public:
  using Sink = std::function<void(const std::string& line)>;
  // Bytes free to unprivileged writers on the file system of `path`; nullopt when it
  // cannot say.
  using FreeSpace = std::function<std::optional<int64_t>(const std::string& path)>;

  // `path`: the store's file ("" for a store with none). `sink` gets each line (default:
  // stderr), `free_space` measures (default: statvfs of the file's directory).
  explicit DiskFullLog(std::string path, Sink sink = {}, FreeSpace free_space = {});

  // The outcome of one write to the store (Commit or SaveUsage).
  void Note(const Status& write) EXCLUDES(mu_);

 private:
  // Constant after construction.
  const std::string path_;
  const Sink sink_;
  const FreeSpace free_space_;

  Mutex mu_;
  bool full_ GUARDED_BY(mu_) = false;   // an episode is under way
  int64_t failed_ GUARDED_BY(mu_) = 0;  // writes failed since it began
};

// The free bytes statvfs reports for the directory of `path` (f_bavail: what a
// process without root may still write).
std::optional<int64_t> FreeBytesBeside(const std::string& path);

}  // namespace hachi::server
