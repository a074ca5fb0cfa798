#include "agent/lease_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <utility>

namespace hachi::agent {
namespace {

constexpr uint64_t kMagic = 0x31534C4948434148ULL;  // "HACHILS1", little-endian

// The file's one record. Five 8-byte words at offset 0, written by one pwrite.
struct Record {
  uint64_t magic = kMagic;
  int64_t deadline_ms = 0;  // CLOCK_MONOTONIC; 0 = no lease
  int64_t held_at_ms = 0;   // when the agent wrote it
  uint64_t boot = 0;        // BootTag() of the writer: a record of another boot is void
  uint64_t check = 0;       // Checksum() of the words above
};
static_assert(sizeof(Record) == 40);

// FNV-1a over the record before its checksum: a write torn anywhere fails it.
uint64_t Checksum(const Record& r) {
  const auto* p = reinterpret_cast<const unsigned char*>(&r);
  uint64_t h = 0xCBF29CE484222325ULL;
  for (size_t i = 0; i < offsetof(Record, check); ++i) h = (h ^ p[i]) * 0x100000001B3ULL;
  return h;
}

// This boot: its id, hashed. 0 when the kernel does not say.
uint64_t BootTag() {
  char id[64] = {};
  const int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, id, sizeof id - 1);
  close(fd);
  uint64_t h = 0xCBF29CE484222325ULL;
  for (ssize_t i = 0; i < n; ++i)
    h = (h ^ static_cast<unsigned char>(id[i])) * 0x100000001B3ULL;
  return n > 0 ? h : 0;
}

// A whole record with a good checksum, reading again when a write tore it.
std::optional<Record> ReadRecord(int fd) {
  constexpr int kTries = 4;
  for (int i = 0; i < kTries; ++i) {
    Record r;
    ssize_t n;
    do {
      n = pread(fd, &r, sizeof r, 0);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof r)) return std::nullopt;  // short: no lease
    if (r.magic == kMagic && r.check == Checksum(r)) return r;
  }
  return std::nullopt;
}

Status WriteRecord(int fd, Record r, const std::string& what) {
  r.magic = kMagic;
  r.check = Checksum(r);
  ssize_t n;
  do {
    n = pwrite(fd, &r, sizeof r, 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof r)) {
    return Internal("cannot write the lease file " + what + ": " +
                    (n < 0 ? strerror(errno) : "short write"));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<LeaseFile>> LeaseFile::Open(const std::string& path,
                                                   const Clock* clock) {
  const int wfd =
      open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (wfd < 0) return Internal("cannot open " + path + ": " + strerror(errno));
  struct stat st {};
  if (fstat(wfd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(wfd);
    return PermissionDenied(path + " is not a regular file of this user");
  }
  // Waiters run as the jobs' users: nobody but the agent may read it by name.
  if ((st.st_mode & 07777) != 0600 && fchmod(wfd, 0600) != 0) {
    const int err = errno;
    close(wfd);
    return Internal("chmod " + path + ": " + strerror(err));
  }
  // A second descriptor, read-only, for the waiters (opened by name: /proc/self/fd
  // reopening needs /proc).
  const int rfd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
  if (rfd < 0) {
    const int err = errno;
    close(wfd);
    return Internal("cannot open " + path + ": " + strerror(err));
  }
  const uint64_t boot = BootTag();
  // The deadline a predecessor wrote in this boot still holds its runs (they are
  // adopted); anything else starts as no lease.
  int64_t deadline = 0;
  if (std::optional<Record> old = ReadRecord(rfd); old && old->boot == boot) {
    deadline = old->deadline_ms;
  }
  if (deadline == 0) {
    Record none;
    none.boot = boot;
    if (Status written = WriteRecord(wfd, none, path); !written.ok()) {
      close(wfd);
      close(rfd);
      return written;
    }
  }
  return std::unique_ptr<LeaseFile>(new LeaseFile(path, wfd, rfd, clock, boot, deadline));
}

LeaseFile::LeaseFile(std::string path, int write_fd, int read_fd, const Clock* clock,
                     uint64_t boot, int64_t deadline_ms)
    : path_(std::move(path)),
      write_fd_(write_fd),
      read_fd_(read_fd),
      clock_(clock),
      boot_(boot),
      deadline_ms_(deadline_ms) {}

LeaseFile::~LeaseFile() {
  close(write_fd_);
  close(read_fd_);
}

Status LeaseFile::HoldFor(int64_t ms) {
  MutexLock lock(&mu_);
  const int64_t now = clock_->MonotonicMs();
  Record r;
  // Never 0 (no lease) once held, even on a clock that starts at 0.
  r.deadline_ms = std::max({deadline_ms_, now + std::max<int64_t>(ms, 0), int64_t{1}});
  r.held_at_ms = now;
  r.boot = boot_;
  // Under the lock: two writers must not put an older deadline last. A pwrite to the
  // page cache, no fsync: the readers are this boot's.
  HACHI_RETURN_IF_ERROR(WriteRecord(write_fd_, r, path_));
  deadline_ms_ = r.deadline_ms;
  return Status::Ok();
}

int64_t LeaseFile::deadline_ms() const {
  MutexLock lock(&mu_);
  return deadline_ms_;
}

std::optional<LeaseView> ReadLease(int fd) {
  std::optional<Record> r = ReadRecord(fd);
  if (!r || r->deadline_ms == 0) return std::nullopt;
  return LeaseView{r->deadline_ms, r->held_at_ms};
}

}  // namespace hachi::agent
