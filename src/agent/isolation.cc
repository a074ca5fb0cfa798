#include "agent/isolation.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/cpulist.h"
#include "core/strings.h"
#include "topo/mig_caps.h"

namespace hachi::agent {
namespace {

constexpr int64_t kMaxDefaultShmMib = 64 * 1024;

std::vector<int> AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

rlim_t NofileFor(rlim_t wanted) {
  // The kernel refuses RLIMIT_NOFILE above fs.nr_open.
  std::optional<std::string> nr_open = ReadFile("/proc/sys/fs/nr_open", nullptr);
  if (nr_open) {
    const rlim_t cap = std::strtoull(nr_open->c_str(), nullptr, 10);
    if (cap > 0) wanted = std::min(wanted, cap);
  }
  return wanted;
}

int64_t KernelLimit(const char* path) {
  std::optional<std::string> text = ReadFile(path, nullptr);
  return text ? std::strtoll(text->c_str(), nullptr, 10) : 0;
}

// The pids.max written in an adopted job's cgroup (the pids controller's directory).
int64_t WrittenPidsMax(const JobCgroup& cg) {
  int64_t most = 0;
  for (const std::string& dir : cg.dirs) {
    std::optional<std::string> text = ReadFile(dir + "/pids.max", nullptr);
    if (text) most = std::max<int64_t>(most, std::strtoll(text->c_str(), nullptr, 10));
  }
  return most;
}

}  // namespace

Isolation::Isolation(IsolationOptions options)
    : options_(std::move(options)),
      node_cpus_(options_.node_cpus.empty() ? AffinityCpus() : options_.node_cpus),
      nofile_(NofileFor(options_.max_open_files)),
      pids_budget_(NodePidsBudget(
          options_.pid_max > 0 ? options_.pid_max
                               : KernelLimit("/proc/sys/kernel/pid_max"),
          options_.threads_max > 0 ? options_.threads_max
                                   : KernelLimit("/proc/sys/kernel/threads-max"),
          options_.pids_reserve)) {}

int64_t Isolation::NodePidsBudget(int64_t pid_max, int64_t threads_max, int64_t reserve) {
  int64_t limit = pid_max > 0 ? pid_max : 32768;  // the kernel's default pid_max
  if (threads_max > 0) limit = std::min(limit, threads_max);
  if (reserve < 0) reserve = std::max<int64_t>(4096, limit / 10);
  return std::max<int64_t>(0, limit - reserve);
}

Result<int64_t> Isolation::JobPidsMax(int64_t per_gpu, const PidsClaim& claim,
                                      int64_t budget, int64_t booked) {
  double share = 1;
  if (claim.gpus > 0 && claim.node_gpus > 0) {
    share = claim.gpus / claim.node_gpus;
  } else if (claim.gpus <= 0 && claim.cpus > 0 && claim.node_cpus > 0) {
    share = static_cast<double>(claim.cpus) / claim.node_cpus;
  }
  const int64_t most =
      per_gpu * std::max<int64_t>(1, static_cast<int64_t>(std::ceil(claim.gpus)));
  const int64_t wanted = std::min(
      most, static_cast<int64_t>(static_cast<double>(budget) * std::min(1.0, share)));
  const int64_t left = budget - booked;
  if (left < kMinJobPids) {
    return Unavailable("the node's pids are taken: running jobs hold " +
                       std::to_string(booked) + " of the " + std::to_string(budget) +
                       " the agent gives jobs (kernel.pid_max/threads-max less the "
                       "agent's --pids-reserve)");
  }
  return std::min(wanted, left);
}

int64_t Isolation::pids_booked() const {
  MutexLock lock(&mu_);
  int64_t sum = 0;
  for (const auto& [job, n] : pids_) sum += n;
  return sum;
}

CgroupMode Isolation::mode() const {
  return options_.cgroups ? options_.cgroups->mode() : CgroupMode::kNone;
}

std::string Isolation::Describe(const std::string& why_none) const {
  if (options_.cgroups) return options_.cgroups->Describe();
  return "none" + (why_none.empty() ? std::string() : " (" + why_none + ")") +
         ": jobs run without memory, CPU, pids and device limits";
}

int64_t Isolation::ShmMib(const api::LaunchSpec& spec) {
  int64_t shm = spec.spec.shm_mib > 0 ? spec.spec.shm_mib
                : spec.memory_mib > 0 ? std::min(spec.memory_mib / 2, kMaxDefaultShmMib)
                                      : kMaxDefaultShmMib;
  if (spec.memory_mib > 0) shm = std::min(shm, spec.memory_mib);
  return std::max<int64_t>(1, shm);
}

std::vector<int> Isolation::BookCpus(const api::LaunchSpec& spec) {
  std::vector<int> preferred;
  for (int g : spec.gpus.Indices()) {
    if (g >= 0 && g < static_cast<int>(options_.gpus.size())) {
      const std::vector<int>& c = options_.gpus[g].cpus;
      preferred.insert(preferred.end(), c.begin(), c.end());
    }
  }
  std::sort(preferred.begin(), preferred.end());
  preferred.erase(std::unique(preferred.begin(), preferred.end()), preferred.end());
  MutexLock lock(&mu_);
  std::set<int> busy;
  for (const auto& [job, cpus] : booked_) busy.insert(cpus.begin(), cpus.end());
  std::vector<int> cpus = ChooseCpus(spec.cpus, node_cpus_, preferred, busy);
  booked_[spec.job] = cpus;
  return cpus;
}

Result<JobIsolation> Isolation::Prepare(const api::LaunchSpec& spec,
                                        SpawnRequest::Setup* setup) {
  JobIsolation iso;
  iso.job = spec.job;
  iso.memory_mib = spec.memory_mib;
  const bool root = geteuid() == 0;
  // NCCL registers its buffers with the NIC (RDMA) and pins them: a low memlock limit
  // makes it fail or fall back to slow paths. Without root the soft limit can only
  // rise to the hard one.
  for (int res : {RLIMIT_MEMLOCK, RLIMIT_NOFILE}) {
    rlimit now{};
    getrlimit(res, &now);
    rlimit up_to_hard = now;
    up_to_hard.rlim_cur = now.rlim_max;
    rlimit to = up_to_hard;
    if (root) to.rlim_cur = to.rlim_max = res == RLIMIT_MEMLOCK ? RLIM_INFINITY : nofile_;
    setup->rlimits.push_back({res, to, up_to_hard});
  }
  if (root && options_.private_shm) {
    setup->shm_options = "size=" + std::to_string(ShmMib(spec)) + "m,mode=1777";
  }
  if (!options_.cgroups) return iso;

  CgroupLimits l;
  l.memory_bytes = spec.memory_mib > 0 ? spec.memory_mib * 1024 * 1024 : 0;
  iso.cpus = BookCpus(spec);
  l.cpus = FormatCpuList(iso.cpus);
  {
    // Booked before the cgroup exists, so two launches at once cannot both take the
    // last of the budget.
    MutexLock lock(&mu_);
    int64_t booked = 0;
    for (const auto& [job, n] : pids_) booked += n;
    PidsClaim claim;
    claim.gpus = spec.share_milli > 0 ? spec.share_milli / 1000.0
                                      : static_cast<double>(spec.gpus.size());
    claim.node_gpus = static_cast<int>(options_.gpus.size());
    claim.cpus = spec.cpus;
    claim.node_cpus = static_cast<int>(node_cpus_.size());
    Result<int64_t> pids = JobPidsMax(options_.pids_per_gpu, claim, pids_budget_, booked);
    if (!pids.ok()) {
      booked_.erase(spec.job);
      return pids.status();
    }
    l.pids_max = *pids;
    pids_[spec.job] = l.pids_max;
  }
  l.restrict_gpus = true;
  for (int g : spec.gpus.Indices()) {
    l.gpu_minors.push_back(g < static_cast<int>(options_.gpus.size())
                               ? options_.gpus[g].minor
                               : static_cast<unsigned>(g));
  }
  if (!spec.mig.empty()) {
    if (Status st = MigDeviceLimits(spec, options_.gpus, options_.mig_caps_root, &l);
        !st.ok()) {
      Finish(iso);
      return st;
    }
  }
  Result<JobCgroup> cg = options_.cgroups->Create("job-" + std::to_string(spec.job), l);
  if (!cg.ok()) {
    Finish(iso);
    return Internal("cannot make the job's cgroup: " + cg.status().message());
  }
  setup->cgroup_procs = cg->procs_files;
  iso.cgroup = std::move(*cg);
  return iso;
}

Status Isolation::MigDeviceLimits(const api::LaunchSpec& spec,
                                  const std::vector<GpuPlacement>& gpus,
                                  const std::string& caps_root, CgroupLimits* limits) {
  Result<topo::MigCaps> caps = topo::ReadMigCaps(caps_root);
  if (!caps.ok()) {
    return Unavailable("cannot isolate the job's MIG devices: " +
                       caps.status().message());
  }
  std::set<unsigned> mine;
  for (const api::MigLaunch& m : spec.mig) {
    const unsigned minor = m.gpu >= 0 && m.gpu < static_cast<int>(gpus.size())
                               ? gpus[static_cast<size_t>(m.gpu)].minor
                               : static_cast<unsigned>(std::max(m.gpu, 0));
    Result<topo::MigCapDevices> d =
        caps->Find(static_cast<int>(minor), m.gpu_instance, m.compute_instance);
    if (!d.ok()) {
      return Unavailable("cannot isolate MIG device " + m.uuid + ": " +
                         d.status().message() + " (" +
                         (caps_root == "/" ? std::string() : caps_root) +
                         "/proc/driver/nvidia-caps/mig-minors)");
    }
    mine.insert(static_cast<unsigned>(d->gi_minor));
    mine.insert(static_cast<unsigned>(d->ci_minor));
  }
  limits->caps_major = caps->major;
  limits->cap_minors.assign(mine.begin(), mine.end());
  limits->cap_others.clear();
  for (const auto& [path, minor] : caps->minors) {
    if (minor >= 0 && !mine.count(static_cast<unsigned>(minor))) {
      limits->cap_others.push_back(static_cast<unsigned>(minor));
    }
  }
  return Status::Ok();
}

std::string Isolation::Finish(JobIsolation& job) {
  std::string oom;
  if (job.cgroup && options_.cgroups) {
    if (options_.cgroups->OomKills(*job.cgroup) > 0) {
      oom = job.memory_mib > 0 ? "out of memory: the job used more than its " +
                                     std::to_string(job.memory_mib) + " MiB"
                               : "out of memory";
    }
    // A failure leaves processes the kernel will not kill (in D state): nothing more to
    // do here; the directory stays and a later agent's TakeOverLeftovers retries.
    (void)options_.cgroups->Destroy(*job.cgroup);
    job.cgroup.reset();
  }
  MutexLock lock(&mu_);
  booked_.erase(job.job);
  pids_.erase(job.job);
  return oom;
}

void Isolation::RemoveParentsIfEmpty() {
  if (!options_.cgroups) return;
  for (const std::string& dir : options_.cgroups->ParentDirs()) rmdir(dir.c_str());
}

std::vector<JobIsolation> Isolation::TakeOverLeftovers(
    const std::set<state::JobId>& keep, std::vector<std::string>* stopped) {
  std::vector<JobIsolation> kept;
  if (!options_.cgroups) return kept;
  for (JobCgroup& cg : options_.cgroups->Leftovers()) {
    const state::JobId id = std::strtoll(cg.name.c_str() + 4, nullptr, 10);  // "job-N"
    if (keep.count(id)) {
      JobIsolation iso;
      iso.job = id;
      // Its pids count against the budget until it ends, as they did for the agent
      // that started it.
      const int64_t pids = WrittenPidsMax(cg);
      if (pids > 0) {
        MutexLock lock(&mu_);
        pids_[id] = pids;
      }
      iso.cgroup = std::move(cg);
      kept.push_back(std::move(iso));
      continue;
    }
    const size_t n = options_.cgroups->Pids(cg).size();
    (void)options_.cgroups->Destroy(cg);
    if (n > 0 && stopped) {
      stopped->push_back("cgroup " + cg.name + " (" + std::to_string(n) + " processes)");
    }
  }
  return kept;
}

}  // namespace hachi::agent
