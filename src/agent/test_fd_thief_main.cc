// For launcher_test: run inside a job, tries to take every descriptor of
// process PID (the job's waiter) with pidfd_getfd(2) and to list /proc/PID/fd, and
// prints what it got: "taken=N denied=N absent=N procfd=listed|refused".
#include <dirent.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PID\n", argv[0]);
    return 2;
  }
  const long pid = std::strtol(argv[1], nullptr, 10);
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    std::perror("pidfd_open");
    return 3;
  }
  int taken = 0, denied = 0, absent = 0;
  for (int fd = 0; fd < 256; ++fd) {
    const int got = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    if (got >= 0) {
      ++taken;
      close(got);
    } else if (errno == EBADF) {
      ++absent;
    } else {
      ++denied;
    }
  }
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  std::printf("taken=%d denied=%d absent=%d procfd=%s\n", taken, denied, absent,
              d != nullptr ? "listed" : "refused");
  if (d != nullptr) closedir(d);
  return 0;
}
