#include "server/job_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "api/output_paths.h"

namespace hachi::server {

std::string JobOutputPath(const state::JobRecord& job) {
  if (job.allocations.empty()) return "";
  // The first node's part, as DispatchLocked builds its LaunchSpec: the fields the
  // output patterns read (%j %x %A %a %u %N %n) and the workdir.
  api::LaunchSpec l;
  l.job = job.id;
  l.spec = job.spec;
  l.user = job.req.user;
  l.partition = job.req.partition;
  l.node = job.allocations[0].node;
  l.node_rank = 0;
  return api::JobOutputFiles(l).out;
}

namespace {

// The server's file system identity switched to the job's user on this thread, so the
// directories on the way to the job's output are searched with the job's permissions,
// not root's. Linux keeps credentials per thread and the raw syscalls change the
// calling thread's only (glibc's setgroups/setuid wrappers would change every thread):
// the fsuid/fsgid become the job's, the supplementary groups just the job's gid (the
// server knows no others of the job: fewer rights than the job, never more), and
// switching the fsuid away from 0 drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and
// CAP_FOWNER from this thread until it is switched back. Not root (hachi dev as a
// user): nothing to switch, the open runs as the server itself.
class AsJobUser {
 public:
  AsJobUser(uid_t uid, gid_t gid) : active_(::geteuid() == 0 && uid != 0) {
    if (!active_) return;
    const int n = ::getgroups(0, nullptr);
    if (n < 0) return;
    old_groups_.resize(static_cast<size_t>(n));
    if (::getgroups(n, old_groups_.data()) != n) return;
    if (::syscall(SYS_setgroups, 1, &gid) != 0) return;
    groups_set_ = true;
    old_gid_ = static_cast<gid_t>(::syscall(SYS_setfsgid, gid));
    old_uid_ = static_cast<uid_t>(::syscall(SYS_setfsuid, uid));
    // setfsuid answers the previous value whether it worked or not: ask again (an
    // invalid id changes nothing and answers the current one).
    ok_ = static_cast<uid_t>(::syscall(SYS_setfsuid, -1)) == uid &&
          static_cast<gid_t>(::syscall(SYS_setfsgid, -1)) == gid;
    ids_set_ = true;
  }
  ~AsJobUser() {
    if (ids_set_) {
      ::syscall(SYS_setfsuid, old_uid_);
      ::syscall(SYS_setfsgid, old_gid_);
    }
    if (groups_set_) ::syscall(SYS_setgroups, old_groups_.size(), old_groups_.data());
  }
  AsJobUser(const AsJobUser&) = delete;
  AsJobUser& operator=(const AsJobUser&) = delete;
  bool ok() const { return !active_ || ok_; }

 private:
  const bool active_;
  bool groups_set_ = false, ids_set_ = false, ok_ = false;
  std::vector<gid_t> old_groups_;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens the job's output for reading without ever opening anything but a regular file
// of the job's uid: first a path-only descriptor of the last component itself (a
// symlink is not followed; O_PATH opens no device, FIFO or terminal), then, once fstat
// says it is a regular file owned by the job, the real open through /proc/self/fd,
// which reopens that very inode (O_NOCTTY all the same). -1 with errno on any refusal.
int OpenJobsRegularFile(const std::string& path, uid_t uid, gid_t gid, struct stat* st) {
  AsJobUser as(uid, gid);
  if (!as.ok()) {
    errno = EPERM;
    return -1;
  }
  Fd where{::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC)};
  if (where.fd < 0) return -1;
  if (::fstat(where.fd, st) != 0) return -1;
  if (!S_ISREG(st->st_mode) || st->st_uid != uid) {
    errno = EPERM;
    return -1;
  }
  const std::string again = "/proc/self/fd/" + std::to_string(where.fd);
  // Not O_NOFOLLOW: /proc/self/fd/N is the link to follow, to the inode just checked.
  return ::open(again.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
}

}  // namespace

Result<LogTail> ReadJobLogTail(const state::JobRecord& job,
                               const std::vector<std::string>& local_nodes,
                               int64_t max_bytes, int lines) {
  const std::string id = std::to_string(job.id);
  if (job.allocations.empty()) return NotFound("job " + id + " has not run: no log yet");
  LogTail t;
  t.node = job.allocations[0].node;
  if (std::find(local_nodes.begin(), local_nodes.end(), t.node) == local_nodes.end()) {
    return NotFound("the log of job " + id + " is on node " + t.node);
  }
  t.path = JobOutputPath(job);
  // One answer for every refusal (missing, a symlink, not a regular file, another
  // uid's, a directory the job's user may not search), so the endpoint tells nobody
  // which of them it was: it is no oracle for paths the caller cannot list.
  struct stat st {};
  const int fd = OpenJobsRegularFile(t.path, job.spec.uid, job.spec.gid, &st);
  if (fd < 0) return NotFound("job " + id + " has no log readable here");
  Fd closer{fd};
  struct stat now {};
  if (::fstat(fd, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino ||
      !S_ISREG(now.st_mode)) {
    return NotFound("job " + id + " has no log readable here");
  }
  st = now;
  max_bytes = std::clamp<int64_t>(max_bytes, 1, kMaxLogTailBytes);
  t.size = st.st_size;
  t.offset = std::max<int64_t>(0, t.size - max_bytes);
  t.text.resize(static_cast<size_t>(t.size - t.offset));
  size_t got = 0;
  while (got < t.text.size()) {
    const ssize_t n = ::pread(fd, t.text.data() + got, t.text.size() - got,
                              static_cast<off_t>(t.offset + static_cast<int64_t>(got)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unavailable("cannot read " + t.path + ": " + std::strerror(errno));
    if (n == 0) break;  // truncated meanwhile
    got += static_cast<size_t>(n);
  }
  t.text.resize(got);
  if (lines > 0) {
    // The last `lines` lines; a final newline ends the last line rather than starting
    // one.
    size_t end = t.text.size();
    if (end > 0 && t.text[end - 1] == '\n') --end;
    size_t cut = 0;
    int seen = 0;
    for (size_t i = end; i > 0; --i) {
      if (t.text[i - 1] == '\n' && ++seen == lines) {
        cut = i;
        break;
      }
    }
    t.text.erase(0, cut);
    t.offset += static_cast<int64_t>(cut);
  }
  return t;
}

}  // namespace hachi::server
