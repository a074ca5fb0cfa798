#include "server/disk_full_log.h"

#include <sys/statvfs.h>

#include <cstdio>
#include <iostream>

#include "state/store.h"

namespace hachi::server {
namespace {

std::string Mebibytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

std::optional<int64_t> FreeBytesBeside(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

DiskFullLog::DiskFullLog(std::string path, Sink sink, FreeSpace free_space)
    : path_(std::move(path)),
      sink_(sink ? std::move(sink)
                 : Sink([](const std::string& line) { std::cerr << line << "\n"; })),
      free_space_(free_space ? std::move(free_space) : FreeSpace(FreeBytesBeside)) {}

void DiskFullLog::Note(const Status& write) {
  // Under the lock throughout, so that an episode's two lines come in order; a leaf
  // lock (the ledger calls this with its own released), held for a line and, once an
  // episode, a statvfs.
  MutexLock lock(&mu_);
  if (write.ok()) {
    if (!full_) return;
    sink_("hachi server: the state store's writes succeed again after " +
          std::to_string(failed_) + " failed");
    full_ = false;
    failed_ = 0;
    return;
  }
  if (full_) {
    ++failed_;
    return;
  }
  if (!state::IsNoSpace(write)) return;  // not this log's concern: the caller's
  full_ = true;
  failed_ = 1;
  std::string line =
      "hachi server: the state store's writes fail for lack of space (" + write.message();
  if (!path_.empty()) {
    const std::optional<int64_t> free = free_space_(path_);
    line += "; " + (free ? Mebibytes(*free) : std::string("unknown space")) +
            " free beside " + path_;
  }
  sink_(line + "); said once until a write succeeds again");
}

}  // namespace hachi::server
