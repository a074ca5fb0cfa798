// The two cgroup drivers (cgroup.h): v1, a directory per controller hierarchy, and v2,
// one directory in the unified hierarchy. OpenCgroups (cgroup.cc) finds the directories
// and builds one of them.
#include "agent/cgroup_drivers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <thread>

namespace hachi::agent {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kKillTimeout = std::chrono::seconds(5);
constexpr unsigned kNvidiaMajor = 195;
constexpr unsigned kFirstNonGpuMinor = 254;  // nvidia-modeset; 255 is nvidiactl

}  // namespace

std::string TrimLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

namespace {

// "oom_kill 3" in a flat keyed file (memory.events, memory.oom_control).
int KeyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  long long v = 0;
  while (in >> k >> v) {
    if (k == key) return static_cast<int>(v);
  }
  return 0;
}

std::vector<std::string> JobDirsUnder(const std::string& base) {
  std::vector<std::string> names;
  DIR* d = opendir(base.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("job-", 0) == 0) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// Base class: what both versions do the same way.
class DriverBase : public CgroupDriver {
 public:
  explicit DriverBase(CgroupFs* fs) : fs_(fs) {}

  std::vector<pid_t> Pids(const JobCgroup& cg) const override {
    std::set<pid_t> pids;
    for (const std::string& f : cg.procs_files) {
      Result<std::string> text = fs_->Read(f);
      if (!text.ok()) continue;
      for (const std::string& w : SplitWords(*text))
        pids.insert(static_cast<pid_t>(std::stol(w)));
    }
    return {pids.begin(), pids.end()};
  }

 protected:
  // Waits until the cgroup is empty, calling `kill_round` while it is not, then removes
  // its directories (rmdir can fail with EBUSY while the last exits are being counted).
  template <typename KillRound>
  Status KillAndRemove(const JobCgroup& cg, KillRound kill_round) {
    const Clock::time_point deadline = Clock::now() + kKillTimeout;
    for (;;) {
      std::vector<pid_t> pids = Pids(cg);
      if (pids.empty()) break;
      if (Clock::now() > deadline) {
        return Internal("cgroup " + cg.name + ": " + std::to_string(pids.size()) +
                        " process(es) still alive after SIGKILL");
      }
      kill_round(pids);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    for (auto it = cg.dirs.rbegin(); it != cg.dirs.rend(); ++it) {
      Status st;
      do {
        st = fs_->RemoveDir(*it);
        if (st.ok()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } while (Clock::now() < deadline);
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }

  CgroupFs* const fs_;
};

// cgroup v1: one directory per controller hierarchy, <mount>/<agent's cgroup>/<parent>/
// job-N. The freezer stops forks while the pids are killed.
class V1Driver final : public DriverBase {
 public:
  // `bases`: controller -> its parent directory (made by OpenCgroups).
  V1Driver(CgroupFs* fs, std::map<std::string, std::string> bases)
      : DriverBase(fs), bases_(std::move(bases)) {}

  CgroupMode mode() const override { return CgroupMode::kV1; }
  bool Enforces(std::string_view c) const override {
    return bases_.count(std::string(c));
  }

  std::string Describe() const override {
    std::string s = "v1 (";
    std::string missing;
    for (const char* c : kV1Controllers) {
      if (bases_.count(c)) {
        s += (s.back() == '(' ? "" : " ") + std::string(c);
      } else {
        missing += std::string(missing.empty() ? "" : " ") + c;
      }
    }
    s += ")";
    if (!bases_.empty()) s += " at " + bases_.begin()->second;
    if (!missing.empty()) s += "; not mounted: " + missing;
    return s;
  }

  Result<JobCgroup> Create(const std::string& name, const CgroupLimits& l) override {
    JobCgroup cg;
    cg.name = name;
    Status st;
    for (const auto& [controller, base] : bases_) {
      const std::string dir = base + "/" + name;
      st = fs_->MakeDir(dir);
      if (!st.ok()) break;
      cg.dirs.push_back(dir);
      cg.procs_files.push_back(dir + "/cgroup.procs");
      st = Limit(controller, base, dir, l);
      if (!st.ok()) break;
    }
    if (!st.ok()) {
      for (auto it = cg.dirs.rbegin(); it != cg.dirs.rend(); ++it)
        (void)fs_->RemoveDir(*it);
      return st;
    }
    return cg;
  }

  int OomKills(const JobCgroup& cg) const override {
    auto it = bases_.find("memory");
    if (it == bases_.end()) return 0;
    Result<std::string> t = fs_->Read(it->second + "/" + cg.name + "/memory.oom_control");
    return t.ok() ? KeyedValue(*t, "oom_kill") : 0;
  }

  Status Destroy(const JobCgroup& cg) override {
    auto fz = bases_.find("freezer");
    const std::string freezer =
        fz == bases_.end() ? "" : fz->second + "/" + cg.name + "/freezer.state";
    return KillAndRemove(cg, [&](const std::vector<pid_t>&) {
      // Frozen, nothing forks or exits between reading the pids and the kills (a pid
      // read here cannot be reused meanwhile); SIGKILL takes effect at the thaw.
      bool frozen = false;
      if (!freezer.empty() && fs_->Write(freezer, "FROZEN").ok()) {
        const Clock::time_point until = Clock::now() + std::chrono::milliseconds(200);
        do {
          Result<std::string> s = fs_->Read(freezer);
          frozen = s.ok() && TrimLine(*s) == "FROZEN";
          if (!frozen) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } while (!frozen && Clock::now() < until);
      }
      for (pid_t p : Pids(cg)) kill(p, SIGKILL);
      if (!freezer.empty()) (void)fs_->Write(freezer, "THAWED");
      (void)frozen;
    });
  }

  std::vector<JobCgroup> Leftovers() const override {
    std::set<std::string> names;
    for (const auto& [c, base] : bases_) {
      for (std::string& n : JobDirsUnder(base)) names.insert(std::move(n));
    }
    std::vector<JobCgroup> out;
    for (const std::string& n : names) {
      JobCgroup cg;
      cg.name = n;
      for (const auto& [c, base] : bases_) {
        const std::string dir = base + "/" + n;
        if (!fs_->Exists(dir)) continue;
        cg.dirs.push_back(dir);
        cg.procs_files.push_back(dir + "/cgroup.procs");
      }
      out.push_back(std::move(cg));
    }
    return out;
  }

  std::vector<std::string> ParentDirs() const override {
    std::vector<std::string> out;
    for (const auto& [c, base] : bases_) out.push_back(base);
    return out;
  }

 private:
  Status Limit(const std::string& controller, const std::string& base,
               const std::string& dir, const CgroupLimits& l) {
    if (controller == "cpuset") {
      // A v1 cpuset takes no tasks until both are set; empty means the parent's.
      Result<std::string> cpus =
          l.cpus.empty() ? fs_->Read(base + "/cpuset.cpus") : l.cpus;
      Result<std::string> mems =
          l.mems.empty() ? fs_->Read(base + "/cpuset.mems") : l.mems;
      if (!cpus.ok()) return cpus.status();
      if (!mems.ok()) return mems.status();
      if (Status st = fs_->Write(dir + "/cpuset.cpus", TrimLine(*cpus)); !st.ok())
        return st;
      return fs_->Write(dir + "/cpuset.mems", TrimLine(*mems));
    }
    if (controller == "memory" && l.memory_bytes > 0) {
      const std::string bytes = std::to_string(l.memory_bytes);
      if (Status st = fs_->Write(dir + "/memory.limit_in_bytes", bytes); !st.ok())
        return st;
      // Memory plus swap, where swap accounting is on: no swapping past the limit.
      if (fs_->Exists(dir + "/memory.memsw.limit_in_bytes")) {
        return fs_->Write(dir + "/memory.memsw.limit_in_bytes", bytes);
      }
      return Status::Ok();
    }
    if (controller == "pids" && l.pids_max > 0) {
      return fs_->Write(dir + "/pids.max", std::to_string(l.pids_max));
    }
    if (controller == "devices" && l.restrict_gpus) {
      // The child inherits "a *:* rwm"; v1 cannot deny 195:* and re-allow single minors
      // under an allow-all parent, so each other GPU minor is denied.
      for (unsigned m = 0; m < kFirstNonGpuMinor; ++m) {
        if (std::count(l.gpu_minors.begin(), l.gpu_minors.end(), m)) continue;
        Status st =
            fs_->Write(dir + "/devices.deny", "c " + std::to_string(kNvidiaMajor) + ":" +
                                                  std::to_string(m) + " rwm");
        if (!st.ok()) return st;
      }
      // MIG: every nvidia-caps minor the driver lists but the job's own.
      for (unsigned m : l.cap_others) {
        if (l.caps_major < 0) break;
        Status st =
            fs_->Write(dir + "/devices.deny", "c " + std::to_string(l.caps_major) + ":" +
                                                  std::to_string(m) + " rwm");
        if (!st.ok()) return st;
      }
    }
    return Status::Ok();
  }

  const std::map<std::string, std::string> bases_;
};

// cgroup v2: one directory, <mount>/<parent>/job-N; controllers enabled in the parent's
// cgroup.subtree_control when the hierarchy has them (a hybrid machine binds them to
// v1: then only the device filter and cgroup.kill work here).
class V2Driver final : public DriverBase {
 public:
  V2Driver(CgroupFs* fs, std::string base, std::set<std::string> enabled)
      : DriverBase(fs), base_(std::move(base)), enabled_(std::move(enabled)) {}

  CgroupMode mode() const override { return CgroupMode::kV2; }
  bool Enforces(std::string_view c) const override {
    return c == "devices" || enabled_.count(std::string(c));
  }

  std::string Describe() const override {
    std::string on, off;
    for (const char* c : {"memory", "cpuset", "pids"}) {
      std::string& to = enabled_.count(c) ? on : off;
      to += (to.empty() ? "" : " ") + std::string(c);
    }
    std::string s = "v2 (" + on + (on.empty() ? "" : " ") + "devices:bpf) at " + base_;
    if (!off.empty()) s += "; controllers not available, so not limited: " + off;
    return s;
  }

  Result<JobCgroup> Create(const std::string& name, const CgroupLimits& l) override {
    JobCgroup cg;
    cg.name = name;
    const std::string dir = base_ + "/" + name;
    if (Status st = fs_->MakeDir(dir); !st.ok()) return st;
    cg.dirs.push_back(dir);
    cg.procs_files.push_back(dir + "/cgroup.procs");
    Status st = Limit(dir, l);
    if (!st.ok()) {
      (void)fs_->RemoveDir(dir);
      return st;
    }
    return cg;
  }

  int OomKills(const JobCgroup& cg) const override {
    Result<std::string> t = fs_->Read(cg.dirs.at(0) + "/memory.events");
    return t.ok() ? KeyedValue(*t, "oom_kill") : 0;
  }

  Status Destroy(const JobCgroup& cg) override {
    const std::string dir = cg.dirs.at(0);
    const bool has_kill = fs_->Exists(dir + "/cgroup.kill");  // Linux >= 5.14
    return KillAndRemove(cg, [&](const std::vector<pid_t>& pids) {
      if (has_kill && fs_->Write(dir + "/cgroup.kill", "1").ok()) return;
      (void)fs_->Write(dir + "/cgroup.freeze", "1");
      for (pid_t p : pids) kill(p, SIGKILL);
      (void)fs_->Write(dir + "/cgroup.freeze", "0");
    });
  }

  std::vector<std::string> ParentDirs() const override { return {base_}; }

  std::vector<JobCgroup> Leftovers() const override {
    std::vector<JobCgroup> out;
    for (const std::string& n : JobDirsUnder(base_)) {
      out.push_back(JobCgroup{n, {base_ + "/" + n}, {base_ + "/" + n + "/cgroup.procs"}});
    }
    return out;
  }

 private:
  Status Limit(const std::string& dir, const CgroupLimits& l) {
    if (enabled_.count("memory") && l.memory_bytes > 0) {
      Status st = fs_->Write(dir + "/memory.max", std::to_string(l.memory_bytes));
      if (!st.ok()) return st;
      if (fs_->Exists(dir + "/memory.swap.max")) {
        if (st = fs_->Write(dir + "/memory.swap.max", "0"); !st.ok()) return st;
      }
    }
    if (enabled_.count("cpuset")) {
      if (!l.cpus.empty()) {
        if (Status st = fs_->Write(dir + "/cpuset.cpus", l.cpus); !st.ok()) return st;
      }
      if (!l.mems.empty()) {
        if (Status st = fs_->Write(dir + "/cpuset.mems", l.mems); !st.ok()) return st;
      }
    }
    if (enabled_.count("pids") && l.pids_max > 0) {
      if (Status st = fs_->Write(dir + "/pids.max", std::to_string(l.pids_max)); !st.ok())
        return st;
    }
    if (l.restrict_gpus) {
      const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return Internal("open " + dir + ": " + strerror(errno));
      Status st = AttachGpuDeviceFilter(fd, l.gpu_minors, l.caps_major, l.cap_minors);
      close(fd);  // the attached program stays with the cgroup until it is removed
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }

  const std::string base_;
  const std::set<std::string> enabled_;
};

}  // namespace

std::unique_ptr<CgroupDriver> NewV1Driver(CgroupFs* fs,
                                          std::map<std::string, std::string> bases) {
  return std::make_unique<V1Driver>(fs, std::move(bases));
}

std::unique_ptr<CgroupDriver> NewV2Driver(CgroupFs* fs, std::string base,
                                          std::set<std::string> enabled) {
  return std::make_unique<V2Driver>(fs, std::move(base), std::move(enabled));
}

}  // namespace hachi::agent
