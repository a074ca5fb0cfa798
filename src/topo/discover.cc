#include "topo/discover.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/strings.h"
#include "topo/nvidia_smi.h"

extern char** environ;

namespace hachi::topo {
namespace {

constexpr size_t kMaxOutput = size_t{16} << 20;

std::string Join(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs argv (argv[0] looked up in PATH unless it has a '/') with stdin and stderr on
// /dev/null, and returns its standard output. kNotFound when the program does not exist;
// kUnavailable when it fails, exits non-zero or outlives `timeout_ms`.
Result<std::string> RunCommand(const std::vector<std::string>& argv, int timeout_ms) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return Internal(std::string("pipe: ") + strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  // glibc reports exec failures (ENOENT, EACCES) from posix_spawnp itself.
  int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    if (rc == ENOENT) return NotFound(argv[0] + " not found");
    return Unavailable("cannot run " + argv[0] + ": " + strerror(rc));
  }
  std::string out;
  bool timed_out = false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < kMaxOutput) out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Unavailable(Join(argv) + " did not finish within " +
                       std::to_string(timeout_ms / 1000) + " s");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return NotFound(argv[0] + " not found (exit status 127)");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string first = std::string(Trim(out.substr(0, out.find('\n'))));
    std::string how = WIFEXITED(status)
                          ? "exit status " + std::to_string(WEXITSTATUS(status))
                          : "signal " + std::to_string(WTERMSIG(status));
    return Unavailable(Join(argv) + " failed (" + how + ")" +
                       (first.empty() ? "" : ": " + first));
  }
  return out;
}

}  // namespace

std::string NvidiaSmiPath(const DiscoverOptions& opts) {
  if (!opts.nvidia_smi.empty()) return opts.nvidia_smi;
  const char* env = std::getenv("HACHI_NVIDIA_SMI");
  if (env && *env) return env;
  return "nvidia-smi";
}

Result<Topology> ReadNvidiaSmi(const DiscoverOptions& opts) {
  const std::string smi = NvidiaSmiPath(opts);
  Result<std::string> matrix = RunCommand({smi, "topo", "-m"}, opts.command_timeout_ms);
  if (!matrix.ok()) return matrix.status();
  Result<Topology> t = ParseTopoMatrix(*matrix, "nvidia-smi topo -m");
  if (!t.ok()) return t.status();
  const std::string fields = "index,uuid,name,memory.total,pci.bus_id";
  Result<std::string> csv =
      RunCommand({smi, "--query-gpu=" + fields, "--format=csv,noheader,nounits"},
                 opts.command_timeout_ms);
  Result<std::vector<QueriedGpu>> gpus =
      csv.ok() ? ParseQueryGpuCsv(*csv, "nvidia-smi --query-gpu", fields)
               : Result<std::vector<QueriedGpu>>(csv.status());
  if (gpus.ok()) {
    MergeQueriedGpus(*t, *gpus, "nvidia-smi --query-gpu");
  } else {
    t->AddReadFinding(
        {Severity::kWarning, "query-gpu-failed", GpuSet(),
         gpus.status().message() + "; GPU names, UUIDs, memory and bus ids are unknown"});
  }
  t->set_source("nvidia-smi (" + smi + ")");
  return t;
}

Result<Topology> DiscoverLocalTopology(const DiscoverOptions& opts) {
  std::string nvml_error = "not tried", smi_error = "not tried";
  if (opts.use_nvml) {
    Result<Topology> t = ProbeNvml(opts.nvml);
    if (t.ok()) return t;
    nvml_error = t.status().message();
  }
  if (opts.use_nvidia_smi) {
    Result<Topology> t = ReadNvidiaSmi(opts);
    if (t.ok()) {
      if (opts.use_nvml) {
        t->AddReadFinding(
            {Severity::kInfo, "nvml-unavailable", GpuSet(),
             "read with nvidia-smi because NVML was not usable: " + nvml_error});
      }
      return t;
    }
    smi_error = t.status().message();
  }
  return Unavailable(
      "no local GPU topology: neither NVML (" + NvmlLibraryPath(opts.nvml) +
      ") nor nvidia-smi (" + NvidiaSmiPath(opts) +
      ") could be used. NVML: " + nvml_error + ". nvidia-smi: " + smi_error +
      ". Describe the node instead with --preset NAME (a built-in server) or --file PATH "
      "(a topology file, docs/topology-format.md)");
}

}  // namespace hachi::topo
