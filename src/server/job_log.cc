#include "server/job_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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
  const int fd = ::open(t.path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP)
      return PermissionDenied(t.path + " is a symlink, not job " + id + "'s log");
    if (e == ENOENT)
      return NotFound("job " + id + "'s log " + t.path + " does not exist");
    return Unavailable("cannot open " + t.path + ": " + std::strerror(e));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Unavailable("cannot stat " + t.path);
  if (!S_ISREG(st.st_mode)) return PermissionDenied(t.path + " is not a regular file");
  if (st.st_uid != job.spec.uid) {
    return PermissionDenied(t.path + " belongs to uid " + std::to_string(st.st_uid) +
                            ", not to job " + id + "'s uid " +
                            std::to_string(job.spec.uid));
  }
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
