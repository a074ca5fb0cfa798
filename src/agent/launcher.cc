#include "agent/launcher.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "agent/environment.h"
#include "agent/nccl_env.h"
#include "agent/spawn.h"
#include "agent/waiter.h"
#include "core/strings.h"

namespace hachi::agent {
namespace {

// Deadlines are points on the Clock's monotonic timeline (Options::clock), held as
// steady_clock time points: for RealClock() the two are the same clock.
using Mono = std::chrono::steady_clock;
constexpr Mono::time_point kNoDeadline = Mono::time_point::max();

Mono::time_point MonoNow(const Clock& clock) {
  return Mono::time_point(std::chrono::microseconds(clock.MonotonicMicros()));
}

// When the time limit expires on the monotonic clock. The limit counts from the server's
// start_time (wall clock, whole seconds), so an agent that launches late does not give
// the job extra time; start_time 0 means "now".
Mono::time_point Deadline(const api::LaunchSpec& spec, Mono::time_point now,
                          const Clock& clock) {
  if (spec.time_limit <= 0) return kNoDeadline;
  if (spec.start_time <= 0) return now + std::chrono::seconds(spec.time_limit);
  const auto wall_now = std::chrono::microseconds(clock.NowMicros());
  const auto left = std::chrono::seconds(spec.start_time + spec.time_limit) - wall_now;
  return now + std::chrono::duration_cast<Mono::duration>(left);
}

// The interpreter line of a script as Linux reads it: "#!/usr/bin/env bash" gives
// {"/usr/bin/env", "bash"} (the rest of the line is one argument); no "#!": /bin/sh.
std::vector<std::string> ShebangArgv(const std::string& script) {
  if (script.rfind("#!", 0) != 0) return {"/bin/sh"};
  std::string line = script.substr(2, script.find('\n') - 2);
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  size_t b = 0;
  while (b < line.size() && space(line[b])) ++b;
  size_t e = b;
  while (e < line.size() && !space(line[e])) ++e;
  if (e == b) return {"/bin/sh"};
  std::vector<std::string> argv{line.substr(b, e - b)};
  while (e < line.size() && space(line[e])) ++e;
  size_t end = line.size();
  while (end > e && space(line[end - 1])) --end;
  if (end > e) argv.push_back(line.substr(e, end - e));
  return argv;
}

// Writes the batch script where the user can run it and nobody else can read it.
Status WriteScript(const std::string& dir, const std::string& path,
                   const api::LaunchSpec& spec, bool chown_to_user) {
  if (mkdir(dir.c_str(), 0711) < 0 && errno != EEXIST) {  // as the daemon makes it
    return Internal("cannot create spool directory " + dir + ": " + strerror(errno));
  }
  unlink(path.c_str());  // a leftover of an earlier run of this id
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
           0700);
  if (fd < 0) return Internal("cannot write " + path + ": " + strerror(errno));
  Status st;
  const std::string& text = spec.spec.script();
  size_t done = 0;
  while (done < text.size() && st.ok()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      st = Internal("cannot write " + path + ": " + strerror(errno));
    else
      done += static_cast<size_t>(n);
  }
  if (st.ok() && fchmod(fd, 0700) < 0)
    st = Internal("chmod " + path + ": " + strerror(errno));
  if (st.ok() && chown_to_user && fchown(fd, spec.spec.uid, spec.spec.gid) < 0) {
    st = Internal("chown " + path + ": " + strerror(errno));
  }
  close(fd);
  if (!st.ok()) unlink(path.c_str());
  return st;
}

// A run's record in the spool, "run-<job>": written once its process started, removed
// when it is reaped. What is left after the agent process died names runs nobody
// supervises.
std::string RunRecordPath(const std::string& spool, JobId job) {
  return spool + "/run-" + std::to_string(job);
}

// The kernel's start time of a process (field 22 of /proc/PID/stat, clock ticks since
// boot): with the pid it names one process, even after the pid is reused. 0 when gone.
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

// The exit file of a run with a waiter (waiter.h): "exit N" / "signal N" once it ended.
std::string ExitFilePath(const std::string& spool, JobId job) {
  return spool + "/exit-" + std::to_string(job);
}

// What a run's record says: enough for the next agent process to watch it to its end
// (its process, time limit, kill grace, script to remove), or to stop it.
struct RunRecord {
  JobId job = 0;
  Time start_time = 0;
  pid_t pid = 0;
  unsigned long long ticks = 0;  // ProcessStartTicks(pid) when it started
  Time deadline = 0;             // wall clock, seconds; 0 = no time limit
  Duration grace = 0;
  bool waiter = false;  // pid is a job waiter, which leaves an exit file
  std::string script;   // "" = none
  // --signal (v3): `signal` due at `signal_at` (wall clock, seconds), to the batch shell
  // alone when `batch_only`; `signaled` once sent, so a restarted agent neither loses it
  // nor sends it twice.
  int signal = 0;
  Time signal_at = 0;
  bool batch_only = false;
  bool signaled = false;
};

// "v3 JOB START PID TICKS DEADLINE GRACE WAITER SIGNAL SIGNAL_AT BATCH_ONLY SIGNALED
// SCRIPT|-"; "v2 JOB START PID TICKS DEADLINE GRACE WAITER SCRIPT|-" (no --signal) is
// read too, and the first format, "JOB START PID TICKS" (an agent of an old version
// left it: stopped, not adopted).
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
      r.batch_only = batch != 0;
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
      std::to_string(r.signal_at) + " " + (r.batch_only ? "1 " : "0 ") +
      (r.signaled ? "1 " : "0 ") + (r.script.empty() ? "-" : r.script) + "\n";
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

// On a job's first node, that its MASTER_PORT is free: the server chose a port no other
// running job of its there holds (server/cycle.cc), so a port in use is held by a
// process outside Hachi, and the job's rendezvous would fail later with EADDRINUSE,
// or worse, rank 1 would reach that process. Bound as a rendezvous server binds it, on
// 0.0.0.0 with SO_REUSEADDR (a port in TIME_WAIT from an earlier job is free), then
// closed. Only a job of more than one process has ranks that meet there; a port that
// cannot be checked (no socket) is left to the job.
Status CheckMasterPortFree(const api::LaunchSpec& spec) {
  const int nodes = std::max<int>(1, static_cast<int>(spec.nodelist.size()));
  const int per_node = spec.gpus_per_node > 0 ? spec.gpus_per_node : spec.gpus.size();
  if (spec.node_rank != 0 || nodes * std::max(1, per_node) <= 1) return Status::Ok();
  if (spec.master_port <= 0 || spec.master_port > 65535) {
    return InvalidArgument("MASTER_PORT " + std::to_string(spec.master_port) +
                           " is not a port");
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Ok();
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(spec.master_port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  const int rc = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  close(fd);
  if (rc != 0 && err == EADDRINUSE) {
    return Unavailable("MASTER_PORT " + std::to_string(spec.master_port) +
                       " is in use on " + spec.node + " by a process outside Hachi");
  }
  return Status::Ok();
}

}  // namespace

namespace {

// The run records in `spool` (unparsable ones are removed).
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

// Still the same process (not a reused pid).
bool SameProcess(const RunRecord& r) {
  return r.ticks != 0 && ProcessStartTicks(r.pid) == r.ticks;
}

// Stops a leftover run: its whole process group, which is the job's session (the child
// called setsid). Removes its files. True when there was something to kill.
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

}  // namespace

std::vector<std::string> StopLeftoverRuns(const std::string& spool_dir) {
  std::vector<std::string> stopped;
  for (const RunRecord& r : LeftoverRuns(spool_dir)) {
    if (StopRun(spool_dir, r)) stopped.push_back(RunName(r));
  }
  return stopped;
}

namespace {

// The job's batch shell: the process launched, or with a job waiter (which forks the job
// and waits) the waiter's child. -1 when it has none (it ended).
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

}  // namespace

struct ProcessLauncher::State {
  struct Job {
    pid_t pid = -1;  // also the process group id (the child called setsid)
    int pidfd = -1;
    Duration grace = 0;
    Mono::time_point deadline = kNoDeadline;  // time limit
    Mono::time_point kill_at = kNoDeadline;   // SIGKILL, once we are stopping it
    bool killed = false;
    api::ExitKind stop = api::ExitKind::kExited;  // kTimeLimit / kCancelled once stopping
    std::string stop_message;                     // with it (Launcher::Stop)
    std::string script;                           // spooled script to remove at the end
    Time start_time = 0;   // the run (api::LaunchSpec::start_time), in its exit
    bool waiter = false;   // pid is the job's waiter: its exit file tells the status
    bool adopted = false;  // left by an earlier agent process: not our child
    JobIsolation iso;      // its cgroup and CPUs
    std::optional<api::LaunchSpec> spec;  // what it was launched with (not adopted)
    std::vector<SpawnRequest::Setup::Limit> rlimits;  // its rlimits, for its steps
    bool holder = false;  // holds a node of a first-node-only job: stopped by SIGKILL
    // --signal: sent at signal_at (before the time limit), once; `record` is rewritten
    // with `signaled` set then, so that a restarted agent does not send it again.
    Mono::time_point signal_at = kNoDeadline;
    RunRecord record;
  };

  mutable std::mutex mu;
  std::map<JobId, Job> jobs;  // guarded by mu
  std::vector<api::JobExit>
      reports;                // guarded by mu: exits the supervisor has to deliver
  std::set<JobId> launching;  // guarded by mu: inside Launch, not yet in jobs
  bool stop = false;          // guarded by mu
  int wake_fd = -1;           // eventfd; constant after construction
  // Tick(): asked and done by the supervisor (guarded by mu).
  uint64_t ticks_asked = 0;
  uint64_t ticks_done = 0;
  std::condition_variable ticked;

  void Wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd, &one, sizeof one);
  }
  bool Known(JobId id) const {  // mu held
    return jobs.count(id) || launching.count(id) ||
           std::any_of(reports.begin(), reports.end(),
                       [id](const api::JobExit& e) { return e.job == id; });
  }
  // Sends `sig` to the job (mu held, so the pid cannot be reaped and reused meanwhile):
  // with `batch_only` to its batch shell alone, else to its process group and every
  // process of its cgroup (those that left the session too).
  static void SendSignal(const Job& job, int sig, bool batch_only) {
    if (batch_only) {
      const pid_t shell = BatchShellPid(job.pid, job.waiter);
      if (shell > 0) kill(shell, sig);
      return;
    }
    kill(-job.pid, sig);
    if (!job.iso.cgroup) return;
    std::set<pid_t> seen;
    for (const std::string& procs : job.iso.cgroup->procs_files) {
      std::optional<std::string> text = ReadFile(procs, nullptr);
      if (!text) continue;
      std::istringstream in(*text);
      for (long p; in >> p;) {
        // The waiter ignores what is meant for its job; the group got it already.
        if (p > 1 && p != job.pid && seen.insert(static_cast<pid_t>(p)).second) {
          if (getpgid(static_cast<pid_t>(p)) != job.pid) kill(static_cast<pid_t>(p), sig);
        }
      }
    }
  }
  // Starts stopping `job` (mu held): SIGTERM now, SIGKILL after its grace.
  static void BeginStop(Job& job, api::ExitKind why, Mono::time_point now) {
    job.stop = why;
    kill(-job.pid, SIGTERM);
    // A holder has nothing to save: its node is free at once.
    job.kill_at = job.holder ? now : now + std::chrono::seconds(job.grace);
  }
};

namespace {
ProcessLauncher::Options WithClock(ProcessLauncher::Options o) {
  if (o.clock == nullptr) o.clock = RealClock();
  return o;
}
}  // namespace

ProcessLauncher::ProcessLauncher(Options options, ExitCallback on_exit)
    : options_(WithClock(std::move(options))),
      on_exit_(std::move(on_exit)),
      isolation_(std::make_unique<Isolation>(options_.isolation)),
      state_(std::make_unique<State>()) {
  // Before anything runs here: the runs an earlier agent process left are watched again
  // (a waiter's run) or stopped, so their GPUs are never given twice.
  TakeOverLeftoverRuns();
  TakeOverCgroups();
  state_->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  supervisor_ = std::thread([this] { Supervise(); });
}

ProcessLauncher::~ProcessLauncher() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->Wake();
  supervisor_.join();
  for (auto& [id, job] : state_->jobs) close(job.pidfd);
  if (state_->wake_fd >= 0) close(state_->wake_fd);
  isolation_->RemoveParentsIfEmpty();  // jobs left running keep theirs
}

void ProcessLauncher::TakeOverLeftoverRuns() {
  const Mono::time_point now = MonoNow(*options_.clock);
  const Time wall = options_.clock->Now();
  for (const RunRecord& r : LeftoverRuns(options_.spool_dir)) {
    if (!r.waiter || !options_.adopt) {
      if (StopRun(options_.spool_dir, r)) leftovers_stopped_.push_back(RunName(r));
      continue;
    }
    const std::string exit_path = ExitFilePath(options_.spool_dir, r.job);
    if (!SameProcess(r)) {
      // It ended while no agent watched: its waiter wrote how (or was killed first).
      api::JobExit e;
      e.job = r.job;
      e.start_time = r.start_time;
      struct stat st {};
      e.end_time = stat(exit_path.c_str(), &st) == 0 ? st.st_mtime : wall;
      if (std::optional<WaitedStatus> w = ReadWaitedStatus(exit_path)) {
        e.kind = w->signaled ? api::ExitKind::kSignaled : api::ExitKind::kExited;
        (w->signaled ? e.signal : e.exit_code) = w->code;
      } else {
        e.kind = api::ExitKind::kLost;
        e.message = "the job ended while its node had no agent, and left no exit status";
      }
      state_->reports.push_back(std::move(e));
      StopRun(options_.spool_dir, r);  // leftovers of its group, and its files
      adopted_.emplace_back(r.job, r.start_time);
      continue;
    }
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, r.pid, 0));
    if (pidfd < 0) {
      if (StopRun(options_.spool_dir, r)) leftovers_stopped_.push_back(RunName(r));
      continue;
    }
    State::Job job;
    job.pid = r.pid;
    job.pidfd = pidfd;
    job.grace = r.grace > 0 ? r.grace : options_.default_kill_grace;
    job.script = r.script;
    job.start_time = r.start_time;
    job.waiter = true;
    job.adopted = true;
    if (r.deadline > 0) job.deadline = now + std::chrono::seconds(r.deadline - wall);
    if (r.signal > 0 && !r.signaled) {  // still due: at its time, or at once if past
      job.signal_at = now + std::chrono::seconds(std::max<Time>(0, r.signal_at - wall));
    }
    job.record = r;
    state_->jobs.emplace(r.job, std::move(job));
    adopted_.emplace_back(r.job, r.start_time);
    runs_adopted_.push_back(RunName(r));
  }
}

void ProcessLauncher::TakeOverCgroups() {
  // Runs still watched keep their cgroups (killed at their end); what else an earlier
  // agent left is killed, escaped processes included.
  std::set<JobId> keep;
  for (const auto& [id, job] : state_->jobs) keep.insert(id);
  for (JobIsolation& iso : isolation_->TakeOverLeftovers(keep, &leftovers_stopped_)) {
    state_->jobs[iso.job].iso = std::move(iso);
  }
}

std::vector<std::pair<JobId, Time>> ProcessLauncher::AdoptedRuns() const {
  // Kept from construction: the supervisor may have delivered (and dropped) the exit of
  // a run that ended meanwhile, and that run was still this launcher's to report.
  return adopted_;
}

Status ProcessLauncher::Launch(const api::LaunchSpec& spec) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->stop) return Unavailable("the launcher is shutting down");
    if (state_->Known(spec.job)) {
      return InvalidArgument("job " + std::to_string(spec.job) +
                             " is already running here");
    }
    state_->launching.insert(spec.job);
  }
  const bool root = geteuid() == 0;
  SpawnRequest req;
  req.env = JobEnvironment(spec);
  for (const auto& [k, v] : options_.job_env) {
    auto same = std::find_if(req.env.begin(), req.env.end(),
                             [&k = k](const auto& kv) { return kv.first == k; });
    if (same != req.env.end()) {
      same->second = v;
    } else {
      req.env.emplace_back(k, v);
    }
  }
  AddNcclEnvironment(options_.gpu_nics, spec.gpus, &req.env);
  req.workdir = spec.spec.workdir.empty() ? "/" : spec.spec.workdir;
  const api::OutputFiles files = api::JobOutputFiles(spec);
  req.stdout_path = files.out;
  req.stderr_path = files.err;
  // A gang's nodes all run the script and share its output files: each opens them for
  // appending, as truncating would wipe what another node wrote first (the netns scale
  // run lost gang ranks' lines that way). --open-mode=truncate holds for one node.
  // Issue 18: a job whose batch script runs on its first node only (sbatch's) holds its
  // other nodes with a process that waits to be stopped, and an interactive allocation
  // (salloc) holds all of them; a holder writes nothing.
  const bool holder =
      spec.spec.interactive || (spec.spec.batch_on_first_node && spec.node_rank > 0);
  req.append_output = spec.spec.open_append ||
                      (spec.nodelist.size() > 1 && !spec.spec.batch_on_first_node);
  if (holder) {
    req.stdout_path = req.stderr_path = "/dev/null";
  } else {
    req.stdout_dirs = OutputDirChain(files.out);
    if (files.err != files.out) req.stderr_dirs = OutputDirChain(files.err);
  }
  req.switch_user = root && spec.spec.uid != 0;
  req.uid = spec.spec.uid;
  req.gid = spec.spec.gid;
  if (req.switch_user) req.groups = GroupsOf(spec.user, req.uid, req.gid);

  State::Job job;
  job.grace = spec.kill_grace > 0 ? spec.kill_grace : options_.default_kill_grace;
  Status st;
  std::vector<std::string> binds;
  if (holder) {
    req.argv = options_.holder;
    if (req.argv.empty()) {
      req.argv = options_.waiter.empty()
                     ? std::vector<std::string>{"sleep", "infinity"}
                     : std::vector<std::string>{options_.waiter, kHoldCommand};
    }
  } else if (!spec.spec.script().empty()) {
    job.script = options_.spool_dir + "/job-" + std::to_string(spec.job) + ".sh";
    st = WriteScript(options_.spool_dir, job.script, spec, req.switch_user);
    // The interpreter is exec'd with the script as its argument, as the kernel would
    // for "#!": exec'ing the script itself fails with ETXTBSY when another launch
    // thread's child still holds the script's (close-on-exec) write descriptor.
    req.argv = ShebangArgv(spec.spec.script());
    req.argv.push_back(job.script);
    req.argv.insert(req.argv.end(), spec.spec.argv.begin(), spec.spec.argv.end());
    binds.push_back(job.script);
  } else {
    req.argv = spec.spec.argv;
    if (req.argv.empty()) st = InvalidArgument("the job has no command");
  }
  if (st.ok()) st = CheckMasterPortFree(spec);
  if (st.ok() && !holder && !spec.spec.container_image.empty()) {
    Result<ContainerLaunch> c =
        PrepareContainer(options_.container, spec, req.argv, req.env, binds);
    if (c.ok()) {
      req.argv = std::move(c->argv);
      req.env = std::move(c->env);
    } else {
      st = c.status();
    }
  }
  if (st.ok()) {
    Result<JobIsolation> iso = isolation_->Prepare(spec, &req.setup);
    if (iso.ok()) {
      job.iso = std::move(*iso);
    } else {
      st = iso.status();
    }
  }
  Result<Spawned> child = Internal("not started");
  int exit_fd = -1;
  if (st.ok() && !options_.waiter.empty()) {
    // Opened here, as root, for the waiter (running as the user) to write into.
    mkdir(options_.spool_dir.c_str(), 0711);
    const std::string exit_path = ExitFilePath(options_.spool_dir, spec.job);
    exit_fd = open(exit_path.c_str(),
                   O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    if (exit_fd < 0) st = Internal("cannot create " + exit_path + ": " + strerror(errno));
    req.waiter = options_.waiter;
    req.exit_fd = exit_fd;
  }
  if (st.ok()) {
    req.exec_paths = ExecCandidates(req.argv[0], req.env);
    child = Spawn(req);
  } else {
    child = st;
  }
  if (exit_fd >= 0) close(exit_fd);

  const Mono::time_point now = MonoNow(*options_.clock);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->launching.erase(spec.job);
  if (!child.ok()) {
    isolation_->Finish(job.iso);
    if (!job.script.empty()) unlink(job.script.c_str());
    if (!options_.waiter.empty())
      unlink(ExitFilePath(options_.spool_dir, spec.job).c_str());
    api::JobExit e;
    e.job = spec.job;
    e.start_time = spec.start_time;
    e.kind = api::ExitKind::kLaunchFailed;
    e.message = child.status().message();
    e.end_time = options_.clock->Now();
    state_->reports.push_back(std::move(e));
  } else {
    job.pid = child->pid;
    job.pidfd = child->pidfd;
    job.waiter = !options_.waiter.empty();
    RunRecord r;
    r.job = spec.job;
    r.start_time = spec.start_time;
    r.pid = child->pid;
    r.ticks = ProcessStartTicks(child->pid);
    if (spec.time_limit > 0) {
      r.deadline = (spec.start_time > 0 ? spec.start_time : options_.clock->Now()) +
                   spec.time_limit;
    }
    r.grace = job.grace;
    r.waiter = job.waiter;
    r.script = job.script;
    job.start_time = spec.start_time;
    job.deadline = Deadline(spec, now, *options_.clock);
    if (spec.spec.signal > 0 && r.deadline > 0) {
      // --signal=SIG@TIME: TIME seconds before the limit (at once when the limit is
      // shorter), by the same clock as the limit itself.
      const Duration before = std::max(0, spec.spec.signal_before);
      r.signal = spec.spec.signal;
      r.signal_at = r.deadline - before;
      r.batch_only = spec.spec.signal_batch_only;
      job.signal_at = job.deadline - std::chrono::seconds(before);
    }
    WriteRunRecord(options_.spool_dir, r);
    job.record = r;
    job.spec = spec;
    job.rlimits = req.setup.rlimits;
    job.holder = holder;
    state_->jobs.emplace(spec.job, std::move(job));
  }
  state_->Wake();
  return Status::Ok();
}

std::optional<StepContext> ProcessLauncher::StepContextOf(JobId id,
                                                          Time start_time) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->jobs.find(id);
  if (it == state_->jobs.end()) return std::nullopt;
  const State::Job& job = it->second;
  if (!job.spec || job.start_time != start_time || job.kill_at != kNoDeadline) {
    return std::nullopt;
  }
  StepContext c;
  c.spec = *job.spec;
  if (job.iso.cgroup) c.cgroup_procs = job.iso.cgroup->procs_files;
  c.rlimits = job.rlimits;
  return c;
}

void ProcessLauncher::Cancel(JobId id, std::string /*reason: the server records it*/) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->jobs.find(id);
  if (it == state_->jobs.end() || it->second.kill_at != kNoDeadline) return;
  State::BeginStop(it->second, api::ExitKind::kCancelled, MonoNow(*options_.clock));
  state_->Wake();
}

void ProcessLauncher::Stop(JobId id, api::ExitKind kind, std::string message) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->jobs.find(id);
  if (it == state_->jobs.end() || it->second.kill_at != kNoDeadline) return;
  State::BeginStop(it->second, kind, MonoNow(*options_.clock));
  it->second.stop_message = std::move(message);
  state_->Wake();
}

void ProcessLauncher::Signal(JobId id, int sig, bool batch_only) {
  // Under mu: the supervisor reaps under mu too, so the group id cannot be reused here.
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->jobs.find(id);
  if (it != state_->jobs.end()) State::SendSignal(it->second, sig, batch_only);
}

void ProcessLauncher::SetTimeLimit(JobId id, Time start_time, Duration time_limit) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->jobs.find(id);
  if (it == state_->jobs.end()) return;
  State::Job& job = it->second;
  if (job.start_time != start_time || job.kill_at != kNoDeadline) return;
  RunRecord& r = job.record;
  // A --signal not sent yet keeps its distance from the limit.
  const Duration before = r.signal > 0 && r.deadline > 0 ? r.deadline - r.signal_at : 0;
  const Mono::time_point now = MonoNow(*options_.clock);
  const Time base = start_time > 0 ? start_time : options_.clock->Now();
  api::LaunchSpec limit;  // Deadline()'s inputs: the same clock rule as at the launch
  limit.start_time = start_time;
  limit.time_limit = time_limit;
  job.deadline = Deadline(limit, now, *options_.clock);
  r.deadline = time_limit > 0 ? base + time_limit : 0;
  if (r.signal > 0 && !r.signaled) {
    if (r.deadline > 0) {
      r.signal_at = r.deadline - before;
      job.signal_at = job.deadline - std::chrono::seconds(before);
    } else {  // no limit: nothing to warn of
      r.signal_at = 0;
      job.signal_at = kNoDeadline;
    }
  }
  WriteRunRecord(options_.spool_dir, r);
  state_->Wake();
}

std::vector<JobId> ProcessLauncher::Running() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<JobId> ids;
  for (const auto& [id, job] : state_->jobs) ids.push_back(id);
  for (const api::JobExit& e : state_->reports) ids.push_back(e.job);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void ProcessLauncher::Tick() {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t want = ++s.ticks_asked;
  s.Wake();
  // Bounded: a supervisor that has returned (stop) ticks no more.
  s.ticked.wait_for(lock, std::chrono::seconds(10),
                    [&] { return s.ticks_done >= want || s.stop; });
}

void ProcessLauncher::Supervise() {
  State& s = *state_;
  std::vector<pollfd> fds;
  std::vector<JobId> ids;
  for (;;) {
    std::vector<api::JobExit> deliver;
    int timeout_ms = -1;
    fds.clear();
    ids.clear();
    {
      std::lock_guard<std::mutex> lock(s.mu);
      // Shutting down: finish what is being stopped (bounded by the kill grace) and
      // report it; leave the other jobs running.
      if (s.stop && s.reports.empty() &&
          std::none_of(s.jobs.begin(), s.jobs.end(),
                       [](const auto& kv) { return kv.second.kill_at != kNoDeadline; })) {
        return;
      }
      deliver.swap(s.reports);
      const Mono::time_point now = MonoNow(*options_.clock);
      Mono::time_point next = kNoDeadline;
      for (auto& [id, job] : s.jobs) {
        if (s.stop && job.kill_at == kNoDeadline) continue;  // left running
        if (job.kill_at == kNoDeadline && job.signal_at <= now) {
          State::SendSignal(job, job.record.signal, job.record.batch_only);
          job.signal_at = kNoDeadline;
          job.record.signaled = true;
          WriteRunRecord(options_.spool_dir, job.record);
        }
        if (job.kill_at == kNoDeadline && job.deadline <= now) {
          State::BeginStop(job, api::ExitKind::kTimeLimit, now);
        }
        if (!job.killed && job.kill_at <= now) {
          kill(-job.pid, SIGKILL);
          job.killed = true;
        }
        if (job.kill_at == kNoDeadline)
          next = std::min({next, job.deadline, job.signal_at});
        if (!job.killed) next = std::min(next, job.kill_at);
        fds.push_back({job.pidfd, POLLIN, 0});
        ids.push_back(id);
      }
      if (s.ticks_done != s.ticks_asked) {  // what was due is done: Tick() returns
        s.ticks_done = s.ticks_asked;
        s.ticked.notify_all();
      }
      if (next != kNoDeadline) {
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
        timeout_ms = static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
      }
    }
    if (!deliver.empty()) {
      for (const api::JobExit& e : deliver) on_exit_(e);
      continue;  // the callbacks may have launched or cancelled: look again
    }
    fds.push_back({s.wake_fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      // Cannot happen with valid fds; do not spin if it does.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (fds.back().revents) {
      uint64_t n;
      [[maybe_unused]] ssize_t r = read(s.wake_fd, &n, sizeof n);
    }
    std::lock_guard<std::mutex> lock(s.mu);
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = s.jobs.find(ids[i]);
      if (it == s.jobs.end()) continue;
      State::Job& job = it->second;
      api::JobExit e;
      e.job = it->first;
      e.start_time = it->second.start_time;
      const std::string exit_path = ExitFilePath(options_.spool_dir, it->first);
      if (job.adopted) {
        // Not our child (init reaped it): its waiter's exit file tells how the job ended.
        // The group may have lost its leader; a live member keeps the id from reuse.
        kill(-job.pid, SIGKILL);
        if (std::optional<WaitedStatus> w = ReadWaitedStatus(exit_path)) {
          e.kind = w->signaled ? api::ExitKind::kSignaled : api::ExitKind::kExited;
          (w->signaled ? e.signal : e.exit_code) = w->code;
        } else if (job.stop == api::ExitKind::kExited) {
          e.kind = api::ExitKind::kLost;
          e.message = "the job's waiter was killed before its job ended";
        }
      } else {
        siginfo_t info{};
        if (waitid(P_PID, job.pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == 0) {
          continue;  // not exited after all
        }
        // The leader is a zombie until reaped, so its group id is still ours: clear out
        // what is left of the job before the id can be reused.
        kill(-job.pid, SIGKILL);
        int status = 0;
        pid_t r;
        do {
          r = waitpid(job.pid, &status, 0);
        } while (r < 0 && errno == EINTR);
        if (r > 0 && WIFSIGNALED(status)) {
          e.kind = api::ExitKind::kSignaled;
          e.signal = WTERMSIG(status);
        } else if (r > 0) {
          e.exit_code = WEXITSTATUS(status);
        }
      }
      // Whatever is left of the job, in or out of its session, dies with its cgroup.
      const std::string oom = isolation_->Finish(job.iso);
      e.end_time = options_.clock->Now();
      if (job.stop != api::ExitKind::kExited) {
        e.kind = job.stop;
        e.message = job.stop_message;
      } else if (!oom.empty()) {
        e.kind = api::ExitKind::kOutOfMemory;
        e.message = oom;
      }
      close(job.pidfd);
      if (!job.script.empty()) unlink(job.script.c_str());
      if (job.waiter) unlink(exit_path.c_str());
      unlink(RunRecordPath(options_.spool_dir, it->first).c_str());
      s.jobs.erase(it);
      s.reports.push_back(std::move(e));
    }
  }
}

}  // namespace hachi::agent
