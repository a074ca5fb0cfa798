// Helpers for tests that run real jobs through ProcessLauncher (launcher_test.cc,
// cgroup_launch_test.cc): an exit collector to wait on, and process and file probes.
// Test-only; Exits is thread-safe (the launcher's thread reports into it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/launcher.h"
#include "core/testing/wait_for.h"

namespace hachi::agent::testing_util {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Collects exit reports; tests wait on it.
class Exits {
 public:
  ExitCallback Callback() {
    return [this](const api::JobExit& e) {
      std::lock_guard<std::mutex> lock(mu_);
      exits_[e.job].push_back(e);
      at_[e.job] = Clock::now();
      cv_.notify_all();
    };
  }
  // The first report for `job`, waiting up to `timeout`.
  std::optional<api::JobExit> Wait(JobId job,
                                   milliseconds timeout = milliseconds(20000)) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return exits_.count(job) > 0; }))
      return std::nullopt;
    return exits_[job][0];
  }
  bool WaitAll(size_t n, milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return exits_.size() >= n; });
  }
  size_t Count(JobId job) {
    std::lock_guard<std::mutex> lock(mu_);
    return exits_.count(job) ? exits_[job].size() : 0;
  }
  Clock::time_point At(JobId job) {
    std::lock_guard<std::mutex> lock(mu_);
    return at_[job];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<JobId, std::vector<api::JobExit>> exits_;
  std::map<JobId, Clock::time_point> at_;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Gone, or a zombie nobody has reaped yet (orphans go to PID 1 here).
inline bool ProcessGone(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return true;
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
}

inline bool WaitGone(pid_t pid) {
  return WaitFor([&] { return ProcessGone(pid); }, milliseconds(5000));
}

// The pid a job wrote to `path` ("echo $$ > path"), once the line is complete; -1.
inline pid_t WaitPidFile(const std::string& path) {
  std::string s;
  if (!WaitFor(
          [&] {
            s = Slurp(path);
            return !s.empty() && s.back() == '\n';
          },
          milliseconds(10000))) {
    return -1;
  }
  return std::stoi(s);
}

}  // namespace hachi::agent::testing_util
