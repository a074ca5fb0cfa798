#include "agent/cgroup.h"

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

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

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
      for (const std::string& w : Words(*text)) pids.insert(static_cast<pid_t>(std::stol(w)));
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
  bool Enforces(std::string_view c) const override { return bases_.count(std::string(c)); }

  std::string Describe() const override {
    std::string s = "v1 (";
    std::string missing;
    for (const char* c : kControllers) {
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
      for (auto it = cg.dirs.rbegin(); it != cg.dirs.rend(); ++it) (void)fs_->RemoveDir(*it);
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
          frozen = s.ok() && Trim(*s) == "FROZEN";
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

  static constexpr const char* kControllers[] = {"memory", "cpuset", "pids", "devices",
                                                 "freezer"};

 private:
  Status Limit(const std::string& controller, const std::string& base,
               const std::string& dir, const CgroupLimits& l) {
    if (controller == "cpuset") {
      // A v1 cpuset takes no tasks until both are set; empty means the parent's.
      Result<std::string> cpus = l.cpus.empty() ? fs_->Read(base + "/cpuset.cpus") : l.cpus;
      Result<std::string> mems = l.mems.empty() ? fs_->Read(base + "/cpuset.mems") : l.mems;
      if (!cpus.ok()) return cpus.status();
      if (!mems.ok()) return mems.status();
      if (Status st = fs_->Write(dir + "/cpuset.cpus", Trim(*cpus)); !st.ok()) return st;
      return fs_->Write(dir + "/cpuset.mems", Trim(*mems));
    }
    if (controller == "memory" && l.memory_bytes > 0) {
      const std::string bytes = std::to_string(l.memory_bytes);
      if (Status st = fs_->Write(dir + "/memory.limit_in_bytes", bytes); !st.ok()) return st;
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
        Status st = fs_->Write(dir + "/devices.deny",
                               "c " + std::to_string(kNvidiaMajor) + ":" +
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
      Status st = AttachGpuDeviceFilter(fd, l.gpu_minors);
      close(fd);  // the attached program stays with the cgroup until it is removed
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }

  const std::string base_;
  const std::set<std::string> enabled_;
};

struct Mount {
  std::string root;        // the mount's root within its hierarchy
  std::string mountpoint;
  std::string fstype;
  std::vector<std::string> options;  // super options: the v1 controllers
};

std::vector<Mount> CgroupMounts(const std::string& mountinfo, CgroupFs* fs) {
  std::vector<Mount> out;
  Result<std::string> text = fs->Read(mountinfo);
  if (!text.ok()) return out;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f = Words(line);
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || dash + 3 > f.end()) continue;
    Mount m{f[3], f[4], *(dash + 1), {}};
    if (m.fstype != "cgroup" && m.fstype != "cgroup2") continue;
    std::istringstream opts(*(dash + 3));
    for (std::string o; std::getline(opts, o, ',');) m.options.push_back(o);
    out.push_back(std::move(m));
  }
  return out;
}

// The agent's own cgroup per v1 controller ("4:memory:/a/b" -> memory: /a/b).
std::map<std::string, std::string> SelfCgroups(const std::string& path, CgroupFs* fs) {
  std::map<std::string, std::string> out;
  Result<std::string> text = fs->Read(path);
  if (!text.ok()) return out;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::istringstream cs(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(cs, c, ',');) out[c] = line.substr(b + 1);
  }
  return out;
}

std::string Join(const std::string& a, const std::string& b) {
  if (b.empty() || b == "/") return a;
  return a + (b.front() == '/' ? "" : "/") + b;
}

Result<std::unique_ptr<CgroupDriver>> OpenV1(const CgroupOptions& o, CgroupFs* fs,
                                             const std::vector<Mount>& mounts) {
  std::map<std::string, std::string> self;
  if (o.root.empty()) self = SelfCgroups(o.self_cgroup, fs);
  std::map<std::string, std::string> bases;
  for (const char* c : V1Driver::kControllers) {
    std::string own;
    if (o.root.empty()) {
      auto m = std::find_if(mounts.begin(), mounts.end(), [c](const Mount& x) {
        return x.fstype == "cgroup" &&
               std::count(x.options.begin(), x.options.end(), std::string(c));
      });
      if (m == mounts.end()) continue;
      // Nested under the agent's own cgroup, so limits set on the agent hold for jobs.
      std::string rel = self.count(c) ? self[c] : "/";
      if (m->root != "/" && rel.rfind(m->root, 0) == 0) rel = rel.substr(m->root.size());
      own = Join(m->mountpoint, rel);
    } else {
      own = o.root + "/" + c;
      if (!fs->Exists(own)) continue;
    }
    const std::string base = own + "/" + o.parent;
    if (Status st = fs->MakeDir(base); !st.ok()) return st;
    if (std::string(c) == "cpuset") {
      // A new v1 cpuset starts empty; give the parent all of the agent's CPUs and nodes.
      for (const char* f : {"cpuset.cpus", "cpuset.mems"}) {
        Result<std::string> mine = fs->Read(base + "/" + f);
        if (mine.ok() && !Trim(*mine).empty()) continue;
        Result<std::string> up = fs->Read(own + "/" + f);
        if (!up.ok()) return up.status();
        if (Status st = fs->Write(base + "/" + f, Trim(*up)); !st.ok()) return st;
      }
    }
    bases[c] = base;
  }
  if (bases.empty()) return Unavailable("no cgroup v1 controllers are mounted");
  return std::unique_ptr<CgroupDriver>(std::make_unique<V1Driver>(fs, std::move(bases)));
}

Result<std::unique_ptr<CgroupDriver>> OpenV2(const CgroupOptions& o, CgroupFs* fs,
                                             const std::vector<Mount>& mounts) {
  std::string root = o.root;
  if (root.empty()) {
    auto m = std::find_if(mounts.begin(), mounts.end(),
                          [](const Mount& x) { return x.fstype == "cgroup2"; });
    if (m == mounts.end()) return Unavailable("cgroup2 is not mounted");
    root = m->mountpoint;
  }
  const std::string base = root + "/" + o.parent;
  if (Status st = fs->MakeDir(base); !st.ok()) return st;
  // Delegate the controllers this hierarchy has, down to the jobs: the root's and the
  // parent's subtree_control (the parent holds no processes, as v2 requires).
  std::string want;
  if (Result<std::string> have = fs->Read(root + "/cgroup.controllers"); have.ok()) {
    for (const std::string& c : Words(*have)) {
      if (c == "memory" || c == "cpuset" || c == "pids") want += (want.empty() ? "+" : " +") + c;
    }
  }
  std::set<std::string> enabled;
  if (!want.empty()) {
    (void)fs->Write(root + "/cgroup.subtree_control", want);  // may be on already
    (void)fs->Write(base + "/cgroup.subtree_control", want);
    if (Result<std::string> on = fs->Read(base + "/cgroup.subtree_control"); on.ok()) {
      for (std::string c : Words(*on)) enabled.insert(c[0] == '+' ? c.substr(1) : c);
    }
  }
  return std::unique_ptr<CgroupDriver>(
      std::make_unique<V2Driver>(fs, base, std::move(enabled)));
}

}  // namespace

std::string_view CgroupModeName(CgroupMode m) {
  switch (m) {
    case CgroupMode::kNone: return "none";
    case CgroupMode::kV1: return "v1";
    case CgroupMode::kV2: return "v2";
  }
  return "none";
}

Status CgroupFs::MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) < 0 && errno != EEXIST)
    return Internal("mkdir " + path + ": " + strerror(errno));
  return Status::Ok();
}

Status CgroupFs::RemoveDir(const std::string& path) {
  if (rmdir(path.c_str()) < 0 && errno != ENOENT)
    return Internal("rmdir " + path + ": " + strerror(errno));
  return Status::Ok();
}

Status CgroupFs::Write(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Internal("cannot open " + path + ": " + strerror(errno));
  const ssize_t n = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Internal("cannot write \"" + text + "\" to " + path + ": " + strerror(err));
  }
  return Status::Ok();
}

Result<std::string> CgroupFs::Read(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal("cannot open " + path + ": " + strerror(errno));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  const int err = errno;
  close(fd);
  if (n < 0) return Internal("cannot read " + path + ": " + strerror(err));
  return out;
}

bool CgroupFs::Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

CgroupFs* RealCgroupFs() {
  static CgroupFs fs;
  return &fs;
}

Result<std::unique_ptr<CgroupDriver>> OpenCgroups(const CgroupOptions& o) {
  CgroupFs* fs = o.fs ? o.fs : RealCgroupFs();
  if (o.mode == "none") return std::unique_ptr<CgroupDriver>();
  if (o.mode != "auto" && o.mode != "v1" && o.mode != "v2") {
    return InvalidArgument("--cgroup " + o.mode + ": expected auto, v1, v2 or none");
  }
  if (o.root.empty() && geteuid() != 0) {
    return PermissionDenied("jobs get cgroups only when the agent runs as root");
  }
  std::vector<Mount> mounts;
  if (o.root.empty()) mounts = CgroupMounts(o.mountinfo, fs);
  std::string mode = o.mode;
  if (mode == "auto") {
    const bool v2_only = o.root.empty()
        ? std::any_of(mounts.begin(), mounts.end(),
                      [](const Mount& m) {
                        return m.fstype == "cgroup2" && m.mountpoint == "/sys/fs/cgroup";
                      })
        : fs->Exists(o.root + "/cgroup.controllers");
    const bool has_v1 = std::any_of(mounts.begin(), mounts.end(),
                                    [](const Mount& m) { return m.fstype == "cgroup"; }) ||
                        (!o.root.empty() && fs->Exists(o.root + "/memory"));
    if (v2_only) {
      mode = "v2";
    } else if (has_v1) {
      mode = "v1";
    } else {
      return Unavailable("no cgroup hierarchy is mounted");
    }
  }
  return mode == "v1" ? OpenV1(o, fs, mounts) : OpenV2(o, fs, mounts);
}

std::vector<int> ChooseCpus(int want, const std::vector<int>& all,
                            const std::vector<int>& preferred, const std::set<int>& busy) {
  if (want <= 0 || want >= static_cast<int>(all.size())) return all;
  std::set<int> known(all.begin(), all.end());
  std::set<int> chosen;
  auto take = [&](const std::vector<int>& from, bool free_only) {
    for (int c : from) {
      if (static_cast<int>(chosen.size()) >= want) return;
      if (!known.count(c) || (free_only && busy.count(c))) continue;
      chosen.insert(c);
    }
  };
  take(preferred, true);
  take(all, true);
  take(preferred, false);
  take(all, false);
  return {chosen.begin(), chosen.end()};
}

}  // namespace hachi::agent
