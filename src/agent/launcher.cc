#include "agent/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include "agent/environment.h"
#include "agent/launcher_state.h"
#include "agent/nccl_env.h"
#include "agent/spawn.h"
#include "agent/waiter.h"
#include "api/output_paths.h"
#include "core/mutex.h"
#include "core/strings.h"

namespace hachi::agent {
namespace {

// When the time limit expires on the monotonic clock: the time the server said was left
// when it sent the launch, from now, so that the agent's own wall clock decides nothing
// (a clock an hour off would kill every job at once, or let it run an hour over). From
// an older server, which does not say, the limit counts from its start_time (wall
// clock, whole seconds); start_time 0 means "now".
Mono::time_point Deadline(const api::LaunchSpec& spec, Mono::time_point now,
                          const Clock& clock) {
  if (spec.time_limit <= 0) return kNoDeadline;
  if (spec.time_left >= 0) return now + std::chrono::seconds(spec.time_left);
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
    // Busy: the server skips that port there and places the job again.
    return Busy("MASTER_PORT " + std::to_string(spec.master_port) + " is in use on " +
                spec.node + " by a process outside Hachi");
  }
  return Status::Ok();
}

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
    MutexLock lock(&state_->mu);
    state_->stop = true;
  }
  state_->Wake();
  supervisor_.join();
  for (auto& [id, job] : state_->jobs) close(job.pidfd);
  if (state_->wake_fd >= 0) close(state_->wake_fd);
  isolation_->RemoveParentsIfEmpty();  // jobs left running keep theirs
}

void ProcessLauncher::TakeOverLeftoverRuns() {
  // Before the supervisor starts: nobody else takes it yet.
  MutexLock lock(&state_->mu);
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
        ApplyWaitedStatus(*w, options_.node, &e);
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
    Run job;
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
  // Before the supervisor starts: nobody else takes the lock yet.
  MutexLock lock(&state_->mu);
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

// The stages in order: what the process gets (environment, output, user), its
// command, the checks and confinement that may refuse it, the spawn; then, under the
// lock, the run recorded, or its launch failure reported.
Status ProcessLauncher::Launch(const api::LaunchSpec& spec) {
  {
    MutexLock lock(&state_->mu);
    if (state_->stop) return Unavailable("the launcher is shutting down");
    if (state_->Known(spec.job)) {
      return InvalidArgument("job " + std::to_string(spec.job) +
                             " is already running here");
    }
    state_->launching.insert(spec.job);
  }
  // A job whose batch script runs on its first node only (sbatch's) holds its other
  // nodes with a process that waits to be stopped, and an interactive allocation
  // (salloc) holds all of them; a holder writes nothing.
  const bool holder =
      spec.spec.interactive || (spec.spec.batch_on_first_node && spec.node_rank > 0);
  SpawnRequest req = ProcessOf(spec, holder);
  Run run;
  run.grace = spec.kill_grace > 0 ? spec.kill_grace : options_.default_kill_grace;
  req.lease_grace_s = holder ? 0 : run.grace;  // a holder has nothing to save
  std::vector<std::string> binds;  // what a container must see besides the job's
  Status st = SetCommand(spec, holder, req, run, binds);
  if (st.ok()) st = CheckMasterPortFree(spec);
  if (st.ok()) st = Confine(spec, holder, binds, req, run);
  Result<Spawned> child = st.ok() ? SpawnRun(spec, req) : Result<Spawned>(st);

  const Mono::time_point now = MonoNow(*options_.clock);
  MutexLock lock(&state_->mu);
  state_->launching.erase(spec.job);
  if (!child.ok()) {
    LaunchFailedLocked(spec, run, child.status());
  } else {
    StartedLocked(spec, req, holder, *child, std::move(run), now);
  }
  state_->Wake();
  return Status::Ok();
}

// The job's environment (the agent's job_env after JobEnvironment's, replacing a name
// it set; NCCL's NICs), working directory, output files and user.
SpawnRequest ProcessLauncher::ProcessOf(const api::LaunchSpec& spec, bool holder) const {
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
  req.append_output = spec.spec.open_append ||
                      (spec.nodelist.size() > 1 && !spec.spec.batch_on_first_node);
  if (holder) {
    req.stdout_path = req.stderr_path = "/dev/null";
  } else {
    req.stdout_dirs = OutputDirChain(files.out);
    if (files.err != files.out) req.stderr_dirs = OutputDirChain(files.err);
  }
  req.umask = api::JobUmask(spec.spec.env());  // as submitted: the job's drops SLURM_*
  req.switch_user = geteuid() == 0 && spec.spec.uid != 0;
  req.uid = spec.spec.uid;
  req.gid = spec.spec.gid;
  if (req.switch_user) req.groups = GroupsOf(spec.user, req.uid, req.gid);
  return req;
}

// The command: a holder's, the batch script (written to the spool), or the job's argv.
Status ProcessLauncher::SetCommand(const api::LaunchSpec& spec, bool holder,
                                   SpawnRequest& req, Run& run,
                                   std::vector<std::string>& binds) const {
  if (holder) {
    req.argv = options_.holder;
    if (req.argv.empty()) {
      req.argv = options_.waiter.empty()
                     ? std::vector<std::string>{"sleep", "infinity"}
                     : std::vector<std::string>{options_.waiter, kHoldCommand};
    }
    return Status::Ok();
  }
  if (!spec.spec.script().empty()) {
    run.script = options_.spool_dir + "/job-" + std::to_string(spec.job) + ".sh";
    Status st = WriteScript(options_.spool_dir, run.script, spec, req.switch_user);
    // The interpreter is exec'd with the script as its argument, as the kernel would
    // for "#!": exec'ing the script itself fails with ETXTBSY when another launch
    // thread's child still holds the script's (close-on-exec) write descriptor.
    req.argv = ShebangArgv(spec.spec.script());
    req.argv.push_back(run.script);
    req.argv.insert(req.argv.end(), spec.spec.argv().begin(), spec.spec.argv().end());
    binds.push_back(run.script);
    return st;
  }
  req.argv = spec.spec.argv();
  if (req.argv.empty()) return InvalidArgument("the job has no command");
  return Status::Ok();
}

// The container around the command (a holder runs bare), then the job's cgroup, CPUs
// and rlimits (isolation.h).
Status ProcessLauncher::Confine(const api::LaunchSpec& spec, bool holder,
                                const std::vector<std::string>& binds, SpawnRequest& req,
                                Run& run) const {
  if (!holder && !spec.spec.container_image.empty()) {
    Result<ContainerLaunch> c =
        PrepareContainer(options_.container, spec, req.argv, req.env, binds);
    if (!c.ok()) return c.status();
    req.argv = std::move(c->argv);
    req.env = std::move(c->env);
  }
  Result<JobIsolation> iso = isolation_->Prepare(spec, &req.setup);
  if (!iso.ok()) return iso.status();
  run.iso = std::move(*iso);
  return Status::Ok();
}

// Spawns the process, through the job waiter when there is one: its exit file is
// opened here, as root, for the waiter (running as the user) to write into.
Result<Spawned> ProcessLauncher::SpawnRun(const api::LaunchSpec& spec,
                                          SpawnRequest& req) const {
  int exit_fd = -1;
  if (!options_.waiter.empty()) {
    mkdir(options_.spool_dir.c_str(), 0711);
    const std::string exit_path = ExitFilePath(options_.spool_dir, spec.job);
    exit_fd = open(exit_path.c_str(),
                   O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    if (exit_fd < 0)
      return Internal("cannot create " + exit_path + ": " + strerror(errno));
    req.waiter = options_.waiter;
    req.exit_fd = exit_fd;
    if (options_.lease_file) req.lease_fd = options_.lease_file->fd();
  }
  req.exec_paths = ExecCandidates(req.argv[0], req.env);
  Result<Spawned> child = Spawn(req);
  if (exit_fd >= 0) close(exit_fd);
  return child;
}

// A launch that failed before its process ran: its files go, and its exit is reported
// as kLaunchFailed with the reason.
void ProcessLauncher::LaunchFailedLocked(const api::LaunchSpec& spec, Run& run,
                                         const Status& why) {
  // The lock is State's, which launcher.h cannot name: its callers hold it.
  state_->mu.AssertHeld();
  isolation_->Finish(run.iso);
  if (!run.script.empty()) unlink(run.script.c_str());
  if (!options_.waiter.empty())
    unlink(ExitFilePath(options_.spool_dir, spec.job).c_str());
  api::JobExit e;
  e.job = spec.job;
  e.start_time = spec.start_time;
  e.kind = api::ExitKind::kLaunchFailed;
  e.message = why.message();
  e.end_time = options_.clock->Now();
  if (why.code() == StatusCode::kBusy) e.busy_port = spec.master_port;
  state_->reports.push_back(std::move(e));
}

// A run that started: its record in the spool (for a later agent process), its time
// limit and --signal on the monotonic clock, and its place among the jobs watched.
void ProcessLauncher::StartedLocked(const api::LaunchSpec& spec, const SpawnRequest& req,
                                    bool holder, const Spawned& child, Run run,
                                    Mono::time_point now) {
  // The lock is State's, which launcher.h cannot name: its callers hold it.
  state_->mu.AssertHeld();
  run.pid = child.pid;
  run.pidfd = child.pidfd;
  run.waiter = !options_.waiter.empty();
  RunRecord r;
  r.job = spec.job;
  r.start_time = spec.start_time;
  r.pid = child.pid;
  r.ticks = ProcessStartTicks(child.pid);
  if (spec.time_limit > 0) {
    // On this agent's wall clock (a restarted agent reads it back with the same clock).
    r.deadline = spec.time_left >= 0
                     ? options_.clock->Now() + spec.time_left
                     : (spec.start_time > 0 ? spec.start_time : options_.clock->Now()) +
                           spec.time_limit;
  }
  r.grace = run.grace;
  r.waiter = run.waiter;
  r.script = run.script;
  run.start_time = spec.start_time;
  run.deadline = Deadline(spec, now, *options_.clock);
  if (spec.spec.signal > 0 && r.deadline > 0) {
    // --signal=SIG@TIME: TIME seconds before the limit (at once when the limit is
    // shorter), by the same clock as the limit itself.
    const Duration before = std::max(0, spec.spec.signal_before);
    r.signal = spec.spec.signal;
    r.signal_at = r.deadline - before;
    // Slurm's --signal: B: the batch shell; else the steps' tasks, not the batch shell
    // (whose default action for USR1/USR2 is to exit) nor srun.
    r.scope =
        spec.spec.signal_batch_only ? api::SignalScope::kBatch : api::SignalScope::kSteps;
    run.signal_at = run.deadline - std::chrono::seconds(before);
  }
  WriteRunRecord(options_.spool_dir, r);
  run.record = r;
  run.spec = spec;
  run.rlimits = req.setup.rlimits;
  run.holder = holder;
  state_->jobs.emplace(spec.job, std::move(run));
}

std::optional<StepContext> ProcessLauncher::StepContextOf(JobId id,
                                                          Time start_time) const {
  MutexLock lock(&state_->mu);
  auto it = state_->jobs.find(id);
  if (it == state_->jobs.end()) return std::nullopt;
  const Run& job = it->second;
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
  MutexLock lock(&state_->mu);
  auto it = state_->jobs.find(id);
  if (it == state_->jobs.end() || it->second.kill_at != kNoDeadline) return;
  State::BeginStop(it->second, api::ExitKind::kCancelled, MonoNow(*options_.clock));
  state_->Wake();
}

void ProcessLauncher::Stop(JobId id, api::ExitKind kind, std::string message) {
  MutexLock lock(&state_->mu);
  auto it = state_->jobs.find(id);
  if (it == state_->jobs.end() || it->second.kill_at != kNoDeadline) return;
  State::BeginStop(it->second, kind, MonoNow(*options_.clock));
  it->second.stop_message = std::move(message);
  state_->Wake();
}

void ProcessLauncher::Signal(JobId id, int sig, bool batch_only) {
  // Under mu: the supervisor reaps under mu too, so the group id cannot be reused here.
  MutexLock lock(&state_->mu);
  auto it = state_->jobs.find(id);
  if (it != state_->jobs.end()) State::SendSignal(it->second, sig, batch_only);
}

void ProcessLauncher::SetTimeLimit(JobId id, Time start_time, Duration time_limit,
                                   Duration time_left) {
  MutexLock lock(&state_->mu);
  auto it = state_->jobs.find(id);
  if (it == state_->jobs.end()) return;
  Run& job = it->second;
  if (job.start_time != start_time || job.kill_at != kNoDeadline) return;
  RunRecord& r = job.record;
  // A --signal not sent yet keeps its distance from the limit.
  const Duration before = r.signal > 0 && r.deadline > 0 ? r.deadline - r.signal_at : 0;
  const Mono::time_point now = MonoNow(*options_.clock);
  const Time base = start_time > 0 ? start_time : options_.clock->Now();
  api::LaunchSpec limit;  // Deadline()'s inputs: the same clock rule as at the launch
  limit.start_time = start_time;
  limit.time_limit = time_limit;
  limit.time_left = time_left;
  job.deadline = Deadline(limit, now, *options_.clock);
  r.deadline = time_limit <= 0  ? 0
               : time_left >= 0 ? options_.clock->Now() + time_left
                                : base + time_limit;
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
  MutexLock lock(&state_->mu);
  std::vector<JobId> ids;
  for (const auto& [id, job] : state_->jobs) ids.push_back(id);
  for (const api::JobExit& e : state_->reports) ids.push_back(e.job);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void ProcessLauncher::Tick() {
  State& s = *state_;
  MutexLock lock(&s.mu);
  AskRoundAndWait(s);
}

}  // namespace hachi::agent
