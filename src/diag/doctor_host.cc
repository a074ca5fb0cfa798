// doctor's node-wide checks of the host: /dev/shm, the memlock limit, cgroups, the
// kernel's pid and thread limits and time synchronisation (host_facts.h and files under
// the root), and whether the fabric manager runs.
#include <dirent.h>

#include <cstdio>
#include <set>
#include <string>

#include "core/strings.h"
#include "diag/doctor_stages.h"

namespace hachi::diag {
namespace {

std::string Bytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(b) / (1 << 30));
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f MiB", static_cast<double>(b) / (1 << 20));
  }
  return buf;
}

std::optional<std::string> Read(const std::string& root, const std::string& path) {
  return ReadFile(UnderRoot(root, path), nullptr);
}

// MemTotal from <root>/proc/meminfo, in bytes; 0 unknown.
uint64_t MemTotal(const std::string& root) {
  std::optional<std::string> text = Read(root, "/proc/meminfo");
  if (!text) return 0;
  for (std::string_view line : SplitLines(*text)) {
    if (!StartsWith(line, "MemTotal:")) continue;
    std::string_view v = Trim(line.substr(9));
    if (v.size() > 3 && v.substr(v.size() - 3) == " kB")
      v = Trim(v.substr(0, v.size() - 3));
    std::optional<long long> kb = ParseInt(v);
    return kb && *kb > 0 ? static_cast<uint64_t>(*kb) << 10 : 0;
  }
  return 0;
}

CheckItem ShmCheck(const std::string& root, const HostFacts& f) {
  const std::string fix =
      "mount -o remount,size=50% /dev/shm (and set it in /etc/fstab); in containers "
      "--shm-size or --ipc=host. NCCL and PyTorch's DataLoader keep shared buffers there";
  if (!f.shm_bytes) {
    return {"shm",
            CheckStatus::kWarn,
            {},
            "the size of /dev/shm is unknown" +
                (f.why_unknown.empty() ? "" : " (" + f.why_unknown + ")"),
            "df -h /dev/shm"};
  }
  constexpr uint64_t kMin = uint64_t{1} << 30;
  const uint64_t shm = *f.shm_bytes, ram = MemTotal(root);
  char share[64] = "";
  const double percent =
      ram > 0 ? 100.0 * static_cast<double>(shm) / static_cast<double>(ram) : 0;
  if (ram > 0 && percent < 1) {
    std::snprintf(share, sizeof(share), " (under 1%% of %s RAM)", Bytes(ram).c_str());
  } else if (ram > 0) {
    std::snprintf(share, sizeof(share), " (%.0f%% of %s RAM)", percent,
                  Bytes(ram).c_str());
  }
  const std::string size = "/dev/shm " + Bytes(shm) + share;
  if (shm < kMin) {
    return {"shm",
            CheckStatus::kWarn,
            {},
            size + ": below 1 GiB, where NCCL and data loaders fail with bus errors",
            fix};
  }
  // The kernel's default is half of RAM: a quarter or less means it was made smaller.
  if (ram > 0 && shm < ram / 4) {
    return {"shm",
            CheckStatus::kWarn,
            {},
            size + ": below a quarter of RAM (the default is half)",
            fix};
  }
  return {"shm", CheckStatus::kOk, {}, size, ""};
}

CheckItem MemlockCheck(const HostFacts& f) {
  if (!f.memlock_bytes) {
    return {"memlock", CheckStatus::kWarn, {}, "RLIMIT_MEMLOCK unknown", "ulimit -l"};
  }
  if (*f.memlock_bytes == kUnlimited) {
    return {"memlock", CheckStatus::kOk, {}, "RLIMIT_MEMLOCK unlimited", ""};
  }
  return {
      "memlock",
      CheckStatus::kWarn,
      {},
      "RLIMIT_MEMLOCK " + Bytes(*f.memlock_bytes) +
          " (this session's soft limit): RDMA and pinned host memory beyond it fail",
      "memlock unlimited for users' sessions and services (/etc/security/limits.conf: "
      "* - memlock unlimited; systemd LimitMEMLOCK=infinity); jobs that hachi agent "
      "starts get unlimited"};
}

CheckItem CgroupCheck(const std::string& root) {
  std::optional<std::string> mounts = Read(root, "/proc/mounts");
  if (!mounts) {
    return {"cgroup", CheckStatus::kWarn, {}, "cannot read /proc/mounts", "mount"};
  }
  bool v2_root = false, v2_unified = false;
  std::set<std::string> v1;
  for (std::string_view line : SplitLines(*mounts)) {
    std::vector<std::string_view> f = Split(line, ' ');
    if (f.size() < 4) continue;
    if (f[2] == "cgroup2") {
      v2_root = v2_root || f[1] == "/sys/fs/cgroup";
      v2_unified = v2_unified || f[1] == "/sys/fs/cgroup/unified";
    } else if (f[2] == "cgroup") {
      for (std::string_view opt : Split(f[3], ',')) v1.insert(std::string(opt));
    }
  }
  std::string mode;
  std::set<std::string> have;
  if (v2_root) {
    mode = "v2";
    const std::string c = Read(root, "/sys/fs/cgroup/cgroup.controllers").value_or("");
    for (std::string_view w : Split(Trim(c), ' ')) {
      if (!w.empty()) have.insert(std::string(w));
    }
  } else if (!v1.empty()) {
    mode = v2_unified ? "hybrid (v1 controllers, v2 beside them)" : "v1";
    have = v1;
  } else {
    return {"cgroup",
            CheckStatus::kWarn,
            {},
            "no cgroup hierarchy is mounted: jobs run without limits or isolation",
            "mount cgroup2 on /sys/fs/cgroup (systemd does this at boot)"};
  }
  // What the agent's job cgroups use (agent/cgroup.h); v2 filters devices with BPF.
  std::vector<std::string> wanted = {"cpu", "cpuset", "memory", "pids"};
  if (!v2_root) wanted.push_back("devices");
  std::string present, missing;
  for (const std::string& c : wanted) {
    std::string& list = have.count(c) ? present : missing;
    list += (list.empty() ? "" : ", ") + c;
  }
  const std::string devices = v2_root ? "; devices through BPF programs" : "";
  if (!missing.empty()) {
    return {"cgroup",
            CheckStatus::kWarn,
            {},
            "cgroup " + mode + " without " + missing +
                ": jobs' limits of those are not enforced",
            v2_root ? "enable the controllers (systemd enables them by default; memory "
                      "may need cgroup_enable=memory on the kernel command line)"
                    : "mount the missing v1 controllers, or boot with cgroup v2 "
                      "(systemd.unified_cgroup_hierarchy=1)"};
  }
  return {
      "cgroup", CheckStatus::kOk, {}, "cgroup " + mode + "; " + present + devices, ""};
}

CheckItem TimeCheck(const HostFacts& f) {
  if (!f.clock_synced) {
    return {"time-sync",
            CheckStatus::kWarn,
            {},
            "clock synchronisation unknown",
            "timedatectl"};
  }
  if (*f.clock_synced) {
    return {"time-sync", CheckStatus::kOk, {}, "the kernel's clock is synchronised", ""};
  }
  return {"time-sync",
          CheckStatus::kWarn,
          {},
          "the kernel's clock is not synchronised (ntp_adjtime: STA_UNSYNC): times in "
          "logs, job records and certificates drift between nodes",
          "enable chrony or systemd-timesyncd (timedatectl set-ntp true) and check that "
          "it reaches its servers (chronyc tracking)"};
}

// What jobs on this node may run of processes and threads together: the agent gives them
// min(kernel.pid_max, kernel.threads-max) less a reserve (agent/isolation.h), shared by
// GPU. Under 16,384 per GPU of an 8-GPU node a PyTorch job (data-loader workers, NCCL's
// and the runtime's threads) can run out, and shares wait for pids; the kernel's own
// default pid_max, 32,768, leaves under 4,096.
CheckItem PidsCheck(const std::string& root) {
  auto read = [&root](const char* path) -> std::optional<long long> {
    std::optional<std::string> text = Read(root, path);
    return text ? ParseInt(Trim(*text)) : std::nullopt;
  };
  const std::optional<long long> pid_max = read("/proc/sys/kernel/pid_max");
  const std::optional<long long> threads_max = read("/proc/sys/kernel/threads-max");
  if (!pid_max || *pid_max <= 0) {
    return {"pids",
            CheckStatus::kWarn,
            {},
            "kernel.pid_max unknown (cannot read /proc/sys/kernel/pid_max)",
            "sysctl kernel.pid_max kernel.threads-max"};
  }
  const bool threads_smaller = threads_max && *threads_max > 0 && *threads_max < *pid_max;
  const long long limit = threads_smaller ? *threads_max : *pid_max;
  const std::string facts =
      "kernel.pid_max " + std::to_string(*pid_max) +
      (threads_max ? ", threads-max " + std::to_string(*threads_max) : "");
  constexpr long long kPerGpu = 16384, kGpus = 8;
  if (limit < kPerGpu * kGpus) {
    return {
        "pids",
        CheckStatus::kWarn,
        {},
        facts + ": all jobs on this node share at most " + std::to_string(limit) +
            " processes and threads (" + std::to_string(limit / kGpus) +
            " per GPU of 8); data loaders, NCCL and the CUDA runtime use thousands, "
            "and shares wait for pids or fail to start threads",
        std::string("sysctl -w ") +
            (threads_smaller ? "kernel.threads-max" : "kernel.pid_max") +
            "=4194304 (and keep it in /etc/sysctl.d/), then restart hachi agent, which "
            "sizes jobs' pids.max from it"};
  }
  return {"pids", CheckStatus::kOk, {}, facts, ""};
}

}  // namespace

std::string UnderRoot(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

std::string ReadHostname(const std::string& root) {
  return std::string(Trim(Read(root, "/proc/sys/kernel/hostname").value_or("")));
}

std::optional<bool> FabricManagerRunning(const std::string& root) {
  const std::string proc = UnderRoot(root, "/proc");
  DIR* dir = opendir(proc.c_str());
  if (dir == nullptr) return std::nullopt;
  bool found = false;
  while (dirent* e = readdir(dir)) {
    const std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    // comm holds 15 characters: nv-fabricmanager reads "nv-fabricmanage".
    std::string comm(Trim(ReadFile(proc + "/" + pid + "/comm", nullptr).value_or("")));
    if (comm == "nv-fabricmanage" || comm == "nv-fabricmanager") {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

std::vector<CheckItem> HostChecks(const std::string& root, const HostFacts& facts) {
  return {ShmCheck(root, facts), MemlockCheck(facts), CgroupCheck(root), PidsCheck(root),
          TimeCheck(facts)};
}

}  // namespace hachi::diag
