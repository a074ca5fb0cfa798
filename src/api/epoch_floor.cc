#include "api/epoch_floor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hachi::api {

Result<std::shared_ptr<EpochFloor>> EpochFloor::Open(const std::string& path) {
  int64_t value = 0;
  if (!path.empty()) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || errno != 0 || v < 0 ||
          (*end != '\0' && std::strcmp(end, "\n") != 0)) {
        return InvalidArgument(path +
                               ": not a leader epoch (a number); remove it to start "
                               "from what the servers say");
      }
      value = v;
    }
  }
  return std::shared_ptr<EpochFloor>(new EpochFloor(path, value));
}

int64_t EpochFloor::value() const {
  MutexLock lock(&mu_);
  return value_;
}

void EpochFloor::SetRiseObserver(RiseObserver observer) {
  MutexLock lock(&mu_);
  observer_ = std::move(observer);
}

bool EpochFloor::Admit(int64_t epoch, const std::string& from) {
  RiseObserver observer;
  {
    MutexLock lock(&mu_);
    if (epoch < value_) return false;
    if (epoch == value_) return true;
    value_ = epoch;
    observer = observer_;
  }
  Persist();
  if (observer) observer(epoch, from);
  return true;
}

void EpochFloor::Persist() {
  if (path_.empty()) return;
  // One writer at a time, each writing the floor as it is then: two rises that race
  // leave the higher on disk whichever writes last.
  MutexLock file_lock(&file_mu_);
  int64_t epoch = 0;
  {
    MutexLock lock(&mu_);
    epoch = value_;
  }
  const std::string tmp = path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string text = std::to_string(epoch) + "\n";
  const bool written =
      ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
      ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path_.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  // The rename itself survives a crash once the directory is synced.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace hachi::api
