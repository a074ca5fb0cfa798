#include "core/file_modes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hachi {
namespace {

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Owned by us, and no wider than `mode` (narrowed with a warning).
Status Narrow(const std::string& path, const struct stat& st, mode_t mode,
              std::ostream& warn) {
  if (st.st_uid != ::geteuid()) {
    return PermissionDenied(path + " belongs to uid " + std::to_string(st.st_uid) +
                            ", not to this process's uid " + std::to_string(::geteuid()) +
                            ": refusing to use it");
  }
  const mode_t have = st.st_mode & 07777;
  if ((have & ~mode) == 0) return Status::Ok();
  const mode_t want = have & mode;
  if (::chmod(path.c_str(), want) != 0) {
    return Unavailable("cannot chmod " + path + " to " + Octal(want) + ": " +
                       std::strerror(errno));
  }
  warn << "hachi: " << path << " was mode " << Octal(have) << ", wider than "
       << Octal(mode) << ": made it " << Octal(want) << "\n";
  return Status::Ok();
}

}  // namespace

Status EnsurePrivateDir(const std::string& path, mode_t mode, std::ostream& warn) {
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return InvalidArgument("an empty directory name");
  for (size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    const std::string parent = dir.substr(0, slash);
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      return Unavailable("cannot create directory " + parent + ": " +
                         std::strerror(errno));
    }
  }
  // mkdir's mode passes through the umask: narrower, never wider, than `mode`.
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
    return Unavailable("cannot create directory " + dir + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return Unavailable("cannot stat " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(dir + " is not a directory");
  return Narrow(dir, st, mode, warn);
}

Status CheckPrivateFile(const std::string& path, mode_t mode, std::ostream& warn) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Unavailable("cannot stat " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(path + " is not a regular file" +
                           (S_ISLNK(st.st_mode) ? " (a symlink)" : ""));
  }
  return Narrow(path, st, mode, warn);
}

Status CheckNotWorldReadable(const std::string& path, const std::string& what) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0)
    return Status::Ok();  // its reader says
  if ((st.st_mode & 007) == 0) return Status::Ok();
  return PermissionDenied(what + " " + path + " is mode " + Octal(st.st_mode) +
                          ": every local user can read it; chmod o-rwx " + path);
}

ScopedUmask::ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
ScopedUmask::~ScopedUmask() { ::umask(old_); }

}  // namespace hachi
