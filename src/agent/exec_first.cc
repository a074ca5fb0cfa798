// ExecFirst (spawn.h) in a file of its own: the job waiter needs it, and linking spawn.cc
// would bring the launcher's user and group lookups (NSS) into the waiter, which is
// linked statically (agent/CMakeLists.txt).
#include <errno.h>
#include <unistd.h>

#include "agent/spawn.h"

namespace hachi::agent {

int ExecFirst(const char* const* paths, size_t n, char* const argv[], char* const envp[],
              char** sh_argv) {
  // execvp's search: skip missing candidates, remember a permission error.
  int err = ENOENT;
  bool denied = false;
  for (size_t i = 0; i < n; ++i) {
    execve(paths[i], argv, envp);
    if (errno == ENOEXEC) {  // an executable text file without "#!": the shell runs it
      sh_argv[1] = const_cast<char*>(paths[i]);
      execve("/bin/sh", sh_argv, envp);
    }
    if (errno == EACCES) {
      denied = true;
    } else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE &&
               errno != ENODEV && errno != ETIMEDOUT) {
      err = errno;
      break;
    }
  }
  return denied && err == ENOENT ? EACCES : err;
}

}  // namespace hachi::agent
