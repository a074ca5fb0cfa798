// The fork/exec step of ProcessLauncher (internal to agent/): everything the child
// needs is prepared in the parent, because after fork() in a threaded process the child
// may only make async-signal-safe calls (no malloc, no NSS lookups, no locks).
//
// Free functions; Spawn is thread-safe (it blocks all signals in the calling thread
// only around fork()).
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "agent/environment.h"
#include "core/status.h"

namespace hachi::agent {

struct SpawnRequest {
  std::vector<std::string> argv;        // argv[0] as the job gave it
  std::vector<std::string> exec_paths;  // files to try in order (ExecCandidates)
  EnvList env;
  std::string workdir;
  std::string stdout_path;  // absolute
  std::string stderr_path;  // absolute; == stdout_path for one shared file
  // --open-mode=append; else an existing output file is truncated (Slurm's default,
  // JobFileAppend=0).
  bool append_output = false;
  // The directories above each output file, outermost first (OutputDirChain): when the
  // file cannot be opened for a missing directory, the child creates these (0755 under
  // the job's umask) with the job's credentials, after switching user, so it can only
  // create what the user could, and retries.
  std::vector<std::string> stdout_dirs;
  std::vector<std::string> stderr_dirs;
  // Job steps: descriptors the child takes as its stdin/stdout/stderr
  // instead of /dev/null and the output files (>= 0; the caller owns and closes them).
  // stdout_fd without stderr_fd: stderr to the stdout files' place as before.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // A terminal (a pty's follower, in stdin_fd/stdout_fd/stderr_fd) made the new
  // session's controlling terminal (srun --pty).
  bool controlling_tty = false;
  // The job's umask (api::JobUmask): its output files and what it creates.
  mode_t umask = 077;
  // A step's task: where to go when `workdir` cannot be entered as the task's user
  // (Slurm's stepd goes to /tmp), writing `workdir_note` and the reason to its stderr
  // first; "" fails the spawn instead (kChdir). Tried as the user, never as root, so
  // the answer tells no more than the user could find out.
  std::string workdir_fallback;
  std::string workdir_note;
  bool switch_user = false;  // the agent is root and the job is not
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (GroupsOf)
  // The job waiter (waiter.h) to exec in the job's place, "" = exec the job itself. With
  // a waiter, exit_fd is the exit file it writes (opened by the caller, who closes it).
  std::string waiter;
  int exit_fd = -1;
  // With a waiter: the node's lease file (lease_file.h, read-only; -1 = none), which the
  // waiter enforces with the job's kill grace, in seconds. The caller owns it.
  int lease_fd = -1;
  int lease_grace_s = 0;
  // The job's isolation (docs/isolation.md), applied first, as root, in this order:
  // join the job's cgroup (write "0" to each file: the child moves itself, so it is
  // inside before it execs anything), set the rlimits, then, when shm_options is set,
  // unshare the mount namespace, make every mount a slave of the host's and mount a
  // tmpfs with these options on /dev/shm.
  struct Setup {
    std::vector<std::string> cgroup_procs;
    struct Limit {
      int resource;  // RLIMIT_*
      rlimit value;
      rlimit fallback;  // when value needs CAP_SYS_RESOURCE, which the agent may lack
    };
    std::vector<Limit> rlimits;
    std::string shm_options;  // "size=16384m,mode=1777"; "" = the host's /dev/shm
  } setup;
};

// The step of the child that failed, sent with errno through the close-on-exec pipe
// (by Spawn's child, and by the job waiter when the job's own exec fails: waiter.h).
enum class SpawnStep : int {
  kSetsid = 1,
  kGroups,
  kGid,
  kUid,
  kChdir,
  kStdin,
  kStdout,
  kStderr,
  kExec,
  kWaiter,  // exec of the job waiter itself
  kCgroup,  // joining the job's cgroup (SpawnRequest::Setup)
  kRlimit,
  kMountNamespace,
  kShm,
  kStdoutDir,  // creating the missing directories of the output files
  kStderrDir,
};
struct SpawnError {
  SpawnStep step;
  int err;
};

// The directories above `path` (absolute), outermost first, without "/" itself:
// "/a/b/c/out" gives {"/a", "/a/b", "/a/b/c"}. Empty for a relative path.
std::vector<std::string> OutputDirChain(const std::string& path);

struct Spawned {
  pid_t pid = -1;
  int pidfd = -1;  // the caller owns it
};

// Starts the process and returns once it has exec'd. On failure the child has been
// reaped and the message names the failed step: "exec nosuchcmd: No such file or
// directory", "cannot open /x/out: Permission denied", "cannot chdir to /x: ...".
Result<Spawned> Spawn(const SpawnRequest& req);

// execvp's search over `paths` (ExecCandidates): returns only when none could be
// exec'd, with the errno to report (EACCES when one was there but not executable). A
// text file without "#!" is run by /bin/sh: `sh_argv` is {"/bin/sh", <slot for the path>,
// argv[1]..., nullptr}. Async-signal-safe (no allocation): for a child after fork.
int ExecFirst(const char* const* paths, size_t n, char* const argv[], char* const envp[],
              char** sh_argv);

// Where execvp would look for `cmd`: itself when it has a slash (relative to the
// workdir), else each directory of PATH from `env` (default /usr/local/bin:/usr/bin:
// /bin).
std::vector<std::string> ExecCandidates(const std::string& cmd, const EnvList& env);

// The supplementary groups of `user` (looked up by uid when the name is empty), always
// containing `gid`; just {gid} when the user is unknown.
std::vector<gid_t> GroupsOf(const std::string& user, uid_t uid, gid_t gid);

}  // namespace hachi::agent
