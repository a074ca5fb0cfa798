#include "server/power_programs.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

extern char** environ;

namespace hachi::server {
namespace {

class ChildPrograms : public PowerPrograms {
 public:
  explicit ChildPrograms(const Clock* clock) : clock_(clock) {}

  // The children still running are left to finish: a resume under way completes (the
  // node registers with the next server), as Slurm leaves its programs running.
  ~ChildPrograms() override = default;

  Result<int> Start(const Call& call) override {
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, "HACHI_POOL=", 11) == 0 ||
          std::strncmp(*e, "HACHI_POWER_ACTION=", 19) == 0) {
        continue;
      }
      env.emplace_back(*e);
    }
    env.push_back("HACHI_POOL=" + call.pool);
    env.push_back("HACHI_POWER_ACTION=" + call.action);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string program = call.program;
    std::string hostlist = call.hostlist;
    char* argv[] = {program.data(), hostlist.data(), nullptr};
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group: the server's terminal signals do not reach it, and a
    // program past its limit is killed with whatever it started.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none;
    sigemptyset(&none);  // the server blocks SIGTERM/SIGINT in its threads
    posix_spawnattr_setsigmask(&attr, &none);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, program.c_str(), nullptr, &attr, argv, envp.data());
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      return Unavailable("cannot run " + call.program + ": " + std::strerror(rc));
    }
    const int id = ++last_id_;
    running_[pid] = {id, call.limit > 0 ? clock_->Now() + call.limit : kNever, call.limit,
                     false};
    return id;
  }

  std::vector<Ended> Poll() override {
    std::vector<Ended> out;
    const Time now = clock_->Now();
    for (auto it = running_.begin(); it != running_.end();) {
      const pid_t pid = it->first;
      Child& c = it->second;
      int status = 0;
      const pid_t got = ::waitpid(pid, &status, WNOHANG);
      if (got == 0) {
        if (now >= c.deadline && !c.killed) {
          ::kill(-pid, SIGKILL);  // its group: what it started goes too
          c.killed = true;
        }
        ++it;
        continue;
      }
      Ended e;
      e.id = c.id;
      if (got < 0) {
        e.how = std::string("lost: ") + std::strerror(errno);
      } else if (c.killed) {
        e.how = "killed after " + FormatDuration(c.limit);
      } else if (WIFEXITED(status)) {
        e.ok = WEXITSTATUS(status) == 0;
        e.how = "exited " + std::to_string(WEXITSTATUS(status));
      } else if (WIFSIGNALED(status)) {
        e.how = "killed by signal " + std::to_string(WTERMSIG(status));
      }
      out.push_back(std::move(e));
      it = running_.erase(it);
    }
    return out;
  }

 private:
  struct Child {
    int id = 0;
    Time deadline = kNever;
    Duration limit = 0;
    bool killed = false;
  };
  const Clock* const clock_;
  int last_id_ = 0;
  std::map<pid_t, Child> running_;
};

}  // namespace

std::unique_ptr<PowerPrograms> RealPowerPrograms(const Clock* clock) {
  return std::make_unique<ChildPrograms>(clock);
}

}  // namespace hachi::server
