#include "agent/run_records.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "agent/launcher.h"
#include "core/strings.h"

namespace hachi::agent {

std::string RunRecordPath(const std::string& spool, JobId job) {
  return spool + "/run-" + std::to_string(job);
}

std::string ExitFilePath(const std::string& spool, JobId job) {
  return spool + "/exit-" + std::to_string(job);
}

unsigned long long ProcessStartTicks(pid_t pid) {
  std::optional<std::string> stat =
      ReadFile("/proc/" + std::to_string(pid) + "/stat", nullptr);
  if (!stat) return 0;
  const size_t paren = stat->rfind(')');  // the command name may hold spaces and ')'
  if (paren == std::string::npos) return 0;
  std::istringstream in(stat->substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && (in >> field); ++i) {
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

std::optional<RunRecord> ParseRunRecord(const std::string& text) {
  std::istringstream in(text);
  RunRecord r;
  std::string first;
  if (!(in >> first)) return std::nullopt;
  long long job = 0, start = 0, pid = 0, deadline = 0, grace = 0;
  int waiter = 0;
  if (first == "v2" || first == "v3") {
    std::string script;
    if (!(in >> job >> start >> pid >> r.ticks >> deadline >> grace >> waiter)) {
      return std::nullopt;
    }
    if (first == "v3") {
      long long sig = 0, at = 0;
      int batch = 0, sent = 0;
      if (!(in >> sig >> at >> batch >> sent)) return std::nullopt;
      r.signal = static_cast<int>(sig);
      r.signal_at = at;
      // The scope's number (0 all, 1 batch, 2 steps): an earlier agent's 0/1 reads alike.
      r.scope = batch == 1   ? api::SignalScope::kBatch
                : batch == 2 ? api::SignalScope::kSteps
                             : api::SignalScope::kAll;
      r.signaled = sent != 0;
    }
    std::getline(in >> std::ws, script);
    r.script = script == "-" ? "" : script;
  } else {
    job = std::strtoll(first.c_str(), nullptr, 10);
    if (!(in >> start >> pid >> r.ticks)) return std::nullopt;
  }
  if (job <= 0 || pid <= 1) return std::nullopt;
  r.job = job;
  r.start_time = start;
  r.pid = static_cast<pid_t>(pid);
  r.deadline = deadline;
  r.grace = grace;
  r.waiter = waiter != 0;
  return r;
}

void WriteRunRecord(const std::string& spool, const RunRecord& r) {
  const std::string path = RunRecordPath(spool, r.job);
  const std::string tmp = path + ".tmp";
  const std::string text =
      "v3 " + std::to_string(r.job) + " " + std::to_string(r.start_time) + " " +
      std::to_string(r.pid) + " " + std::to_string(r.ticks) + " " +
      std::to_string(r.deadline) + " " + std::to_string(r.grace) + " " +
      (r.waiter ? "1 " : "0 ") + std::to_string(r.signal) + " " +
      std::to_string(r.signal_at) + " " + std::to_string(static_cast<int>(r.scope)) +
      " " + (r.signaled ? "1 " : "0 ") + (r.script.empty() ? "-" : r.script) + "\n";
  mkdir(spool.c_str(), 0711);  // made on first use, as for scripts (EEXIST is fine)
  const int fd =
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
           0600);
  if (fd < 0) return;  // best effort: without it a restarted agent cannot stop this run
  const bool ok =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

std::vector<RunRecord> LeftoverRuns(const std::string& spool) {
  std::vector<RunRecord> runs;
  DIR* dir = opendir(spool.c_str());
  if (dir == nullptr) return runs;
  std::vector<std::string> records;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("run-", 0) == 0 && name.find('.') == std::string::npos) {
      records.push_back(spool + "/" + name);
    }
  }
  closedir(dir);
  std::sort(records.begin(), records.end());
  for (const std::string& path : records) {
    std::optional<std::string> text = ReadFile(path, nullptr);
    std::optional<RunRecord> r = text ? ParseRunRecord(*text) : std::nullopt;
    if (r) {
      runs.push_back(std::move(*r));
    } else {
      unlink(path.c_str());
    }
  }
  return runs;
}

bool SameProcess(const RunRecord& r) {
  return r.ticks != 0 && ProcessStartTicks(r.pid) == r.ticks;
}

bool StopRun(const std::string& spool, const RunRecord& r) {
  const bool killed = SameProcess(r) && kill(-r.pid, SIGKILL) == 0;
  unlink(RunRecordPath(spool, r.job).c_str());
  unlink(ExitFilePath(spool, r.job).c_str());
  if (!r.script.empty()) unlink(r.script.c_str());
  return killed;
}

std::string RunName(const RunRecord& r) {
  return "job " + std::to_string(r.job) + " (pid " + std::to_string(r.pid) + ")";
}

std::vector<std::string> StopLeftoverRuns(const std::string& spool_dir) {
  std::vector<std::string> stopped;
  for (const RunRecord& r : LeftoverRuns(spool_dir)) {
    if (StopRun(spool_dir, r)) stopped.push_back(RunName(r));
  }
  return stopped;
}

pid_t BatchShellPid(pid_t pid, bool waiter) {
  if (!waiter) return pid;
  const std::string task =
      "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  if (std::optional<std::string> kids = ReadFile(task, nullptr)) {
    std::istringstream in(*kids);
    long child = 0;
    if (in >> child && child > 1) return static_cast<pid_t>(child);
  }
  // Kernels without CONFIG_PROC_CHILDREN: the process whose parent is the waiter.
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long p = std::strtol(e->d_name, &end, 10);
    if (p <= 1 || *end != '\0') continue;
    std::optional<std::string> stat =
        ReadFile("/proc/" + std::string(e->d_name) + "/stat", nullptr);
    if (!stat) continue;
    const size_t paren = stat->rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream in(stat->substr(paren + 1));
    std::string state;
    long ppid = 0;
    if (in >> state >> ppid && ppid == pid) {
      found = static_cast<pid_t>(p);
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace hachi::agent
