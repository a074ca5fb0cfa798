#include "agent/gpu_processes.h"

#include <pwd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "core/strings.h"

namespace hachi::agent {
namespace {

constexpr size_t kCommandBytes = 200;  // enough to recognise it; the rest is noise

std::optional<state::JobId> ParseJobId(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  state::JobId id = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + (c - '0');
  }
  return id > 0 ? std::optional<state::JobId>(id) : std::nullopt;
}

// "12:memory:/x/hachi/job-12" (v1) or "0::/hachi/job-12" (v2): the job of the first
// hierarchy whose path has "<parent>/job-<N>".
state::JobId JobFromCgroups(const std::string& text, const std::string& parent) {
  for (std::string_view line : Split(text, '\n')) {
    const size_t colon = line.find(':', line.find(':') + 1);
    if (colon == std::string_view::npos) continue;
    const std::vector<std::string_view> parts = Split(line.substr(colon + 1), '/');
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i - 1] != parent || parts[i].substr(0, 4) != "job-") continue;
      if (std::optional<state::JobId> id = ParseJobId(parts[i].substr(4))) return *id;
    }
  }
  return 0;
}

state::JobId JobFromEnvironment(const std::string& environ) {
  for (std::string_view var : Split(environ, '\0')) {
    if (var.substr(0, 13) != "HACHI_JOB_ID=") continue;
    if (std::optional<state::JobId> id = ParseJobId(var.substr(13))) return *id;
  }
  return 0;
}

std::string UserOf(const std::string& status) {
  for (std::string_view line : Split(status, '\n')) {
    if (line.substr(0, 4) != "Uid:") continue;
    const std::string real(Trim(line.substr(4)));
    const unsigned long uid = std::strtoul(real.c_str(), nullptr, 10);
    std::string buf(16384, '\0');
    passwd pw{};
    passwd* found = nullptr;
    if (getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) == 0 &&
        found != nullptr) {
      return found->pw_name;
    }
    return "uid" + std::to_string(uid);
  }
  return "";
}

std::string CommandOf(std::string cmdline) {
  while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
  for (char& c : cmdline) {
    if (c == '\0' || c == '\n') c = ' ';
  }
  if (cmdline.size() > kCommandBytes) cmdline = cmdline.substr(0, kCommandBytes) + "...";
  return cmdline;
}

}  // namespace

state::JobId JobOfProcess(unsigned pid, const std::string& proc_root,
                          const std::string& cgroup_parent) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  if (std::optional<std::string> cg = ReadFile(dir + "/cgroup", nullptr)) {
    if (state::JobId id = JobFromCgroups(*cg, cgroup_parent)) return id;
  }
  if (std::optional<std::string> env = ReadFile(dir + "/environ", nullptr)) {
    return JobFromEnvironment(*env);
  }
  return 0;
}

std::vector<api::GpuProcessReport> DescribeGpuProcesses(
    const std::vector<GpuProcess>& processes, const std::string& proc_root,
    const std::string& cgroup_parent) {
  std::vector<api::GpuProcessReport> out;
  for (const GpuProcess& p : processes) {
    const std::string dir = proc_root + "/" + std::to_string(p.pid);
    std::optional<std::string> status = ReadFile(dir + "/status", nullptr);
    if (!status) continue;  // gone
    api::GpuProcessReport r;
    r.gpu = p.gpu;
    r.pid = p.pid;
    r.used_mib = p.used_mib;
    r.user = UserOf(*status);
    r.command = CommandOf(ReadFile(dir + "/cmdline", nullptr).value_or(""));
    r.job = JobOfProcess(p.pid, proc_root, cgroup_parent);
    out.push_back(std::move(r));
  }
  return out;
}

std::string FormatGib(int64_t mib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(mib) / 1024.0);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s + " GiB";
}

std::vector<std::pair<state::JobId, std::string>> OverSoftLimit(
    const std::vector<api::GpuProcessReport>& processes,
    const std::map<state::JobId, ShareMemoryLimit>& limits) {
  std::map<state::JobId, int64_t> used;
  for (const api::GpuProcessReport& p : processes) {
    auto limit = limits.find(p.job);
    if (p.job == 0 || p.used_mib < 0 || limit == limits.end()) continue;
    if (p.gpu == limit->second.gpu) used[p.job] += p.used_mib;
  }
  std::vector<std::pair<state::JobId, std::string>> over;
  for (const auto& [job, mib] : used) {
    const ShareMemoryLimit& l = limits.at(job);
    if (mib <= l.promised_mib) continue;
    std::string took = FormatGib(mib), promised = FormatGib(l.promised_mib);
    if (took == promised) {  // just over: GiB would read "20 GiB, promised 20 GiB"
      took = std::to_string(mib) + " MiB";
      promised = std::to_string(l.promised_mib) + " MiB";
    }
    over.emplace_back(job, "used " + took + " of GPU memory on GPU " +
                               std::to_string(l.gpu) + ", promised " + promised +
                               " (--gpu-mem)");
  }
  return over;
}

}  // namespace hachi::agent
