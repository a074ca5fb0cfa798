#include "agent/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "agent/cgroup_drivers.h"

namespace hachi::agent {
namespace {

struct Mount {
  std::string root;  // the mount's root within its hierarchy
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
    std::vector<std::string> f = SplitWords(line);
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
  for (const char* c : kV1Controllers) {
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
        if (mine.ok() && !TrimLine(*mine).empty()) continue;
        Result<std::string> up = fs->Read(own + "/" + f);
        if (!up.ok()) return up.status();
        if (Status st = fs->Write(base + "/" + f, TrimLine(*up)); !st.ok()) return st;
      }
    }
    bases[c] = base;
  }
  if (bases.empty()) return Unavailable("no cgroup v1 controllers are mounted");
  return NewV1Driver(fs, std::move(bases));
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
    for (const std::string& c : SplitWords(*have)) {
      if (c == "memory" || c == "cpuset" || c == "pids")
        want += (want.empty() ? "+" : " +") + c;
    }
  }
  std::set<std::string> enabled;
  if (!want.empty()) {
    (void)fs->Write(root + "/cgroup.subtree_control", want);  // may be on already
    (void)fs->Write(base + "/cgroup.subtree_control", want);
    if (Result<std::string> on = fs->Read(base + "/cgroup.subtree_control"); on.ok()) {
      for (std::string c : SplitWords(*on)) enabled.insert(c[0] == '+' ? c.substr(1) : c);
    }
  }
  return NewV2Driver(fs, base, std::move(enabled));
}

}  // namespace

std::string_view CgroupModeName(CgroupMode m) {
  switch (m) {
    case CgroupMode::kNone:
      return "none";
    case CgroupMode::kV1:
      return "v1";
    case CgroupMode::kV2:
      return "v2";
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
  const int fd =
      open(path.c_str(), O_WRONLY | O_CLOEXEC | O_CREAT | O_TRUNC | O_NOCTTY, 0644);
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
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
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
                                             return m.fstype == "cgroup2" &&
                                                    m.mountpoint == "/sys/fs/cgroup";
                                           })
                             : fs->Exists(o.root + "/cgroup.controllers");
    const bool has_v1 =
        std::any_of(mounts.begin(), mounts.end(),
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
                            const std::vector<int>& preferred,
                            const std::set<int>& busy) {
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
