// hachi server / agent / dev (DESIGN.md §1): the long-running processes.
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "agent/cgroup.h"
#include "agent/daemon.h"
#include "agent/gpu_health.h"
#include "agent/gpu_processes.h"
#include "agent/gpu_sampler.h"
#include "agent/kernel_log.h"
#include "agent/launcher.h"
#include "agent/lease_file.h"
#include "agent/nccl_env.h"
#include "agent/waiter.h"
#include "agent/xid_confirm.h"
#include "api/epoch_floor.h"
#include "api/http_client.h"
#include "cli/auth_files.h"
#include "cli/client.h"
#include "cli/fail.h"
#include "cli/ha_server.h"
#include "cli/job_cmds.h"
#include "config/cluster_config.h"
#include "core/cpulist.h"
#include "core/file_modes.h"
#include "server/controller.h"
#include "server/history.h"
#include "server/http_api.h"
#include "sim/cluster_spec.h"
#include "state/store.h"
#include "topo/discover.h"
#include "topo/load.h"
#include "topo/nvml_library.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::cli {
namespace {

// This binary's path ("" when /proc cannot say).
std::string SelfExe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Blocks SIGINT/SIGTERM in every thread started after this, then waits for one.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}
int WaitStopSignal(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

// A simulated node's host facts from its preset (the simulator's table).
struct NodeShape {
  std::string topology_json;
  int cpus = 0;
  int64_t memory_mib = 0;
  std::string what;  // for the banner
};

Result<NodeShape> PresetShape(const std::string& preset) {
  Result<topo::Topology> t = topo::LoadPreset(preset);
  if (!t.ok()) return t.status();
  Result<sched::ClusterState> one =
      sim::BuildCluster("1x" + std::to_string(t->gpu_count()) + ":" + preset);
  if (!one.ok()) return one.status();
  NodeShape s;
  s.topology_json = topo::TopologyToJson(*t);
  s.cpus = one->nodes[0].cpus;
  s.memory_mib = one->nodes[0].memory_mib;
  s.what = preset + " (simulated)";
  return s;
}

int64_t HostMemoryMib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib / 1024;
    in.ignore(1 << 10, '\n');
  }
  return 1024;
}

// Watches this machine's GPUs and forwards each fault to the daemon, which reports it to
// the server: NVML's events and polls (agent/gpu_health.h) and the kernel log's NVRM Xid
// lines (agent/kernel_log.h), the latter checked against the former where NVML watches
// the GPU (agent/xid_confirm.h). Either may be missing (no NVML, /dev/kmsg not
// readable); what is watched is said on stderr.
struct GpuWatch {
  std::shared_ptr<agent::KernelXidConfirmer> confirm;  // both sources' callbacks use it
  std::unique_ptr<agent::GpuHealthMonitor> nvml;
  std::unique_ptr<agent::KernelXidWatcher> kernel_log;
  void Stop() {
    if (nvml) nvml->Stop();
    if (kernel_log) kernel_log->Stop();
  }
};

// The agent samples its running jobs every `interval_s` (0: never): their
// GPUs through NVML on real GPUs (a simulated node has no figures for them), their CPU
// time and memory from their cgroups.
void SampleUsage(double interval_s, bool simulated, agent::AgentOptions* o) {
  o->usage_interval_ms = static_cast<int>(interval_s * 1000);
  if (o->usage_interval_ms <= 0 || simulated) return;
  Result<std::unique_ptr<agent::GpuSampler>> s = agent::GpuSampler::Open("");
  if (!s.ok()) {
    std::cerr << "hachi agent: " << o->node
              << ": no GPU utilisation samples: " << s.status().message() << "\n";
    return;
  }
  std::cerr << "hachi agent: " << o->node << ": GPU samples every " << interval_s
            << " s: " << (*s)->summary() << "\n";
  std::shared_ptr<agent::GpuSampler> sampler = std::move(*s);
  o->sample_gpus = [sampler] { return sampler->Sample(); };
}

GpuWatch WatchGpus(agent::AgentDaemon* daemon, const std::string& node,
                   const std::string& topology_json) {
  agent::GpuHealthCallback report = [daemon, node](const agent::GpuHealthEvent& e) {
    std::cerr << "hachi agent: " << node << " GPU " << e.gpu << ": " << e.message << " ("
              << agent::GpuFaultName(e.fault) << ")\n";
    daemon->ReportHealth(api::GpuHealthEvent{e.gpu, e.kind, e.xid,
                                             std::string(agent::GpuFaultName(e.fault)),
                                             e.message, e.at});
  };
  GpuWatch w;
  w.confirm = std::make_shared<agent::KernelXidConfirmer>();
  agent::GpuHealthOptions options;
  // Every poll: who runs on the GPUs, so the server can report processes no job was
  // given that GPU for (users who pin GPUs by hand).
  options.on_processes = [daemon](const std::vector<agent::GpuProcess>& procs) {
    daemon->ReportProcesses(agent::DescribeGpuProcesses(procs));
  };
  Result<std::unique_ptr<agent::GpuHealthMonitor>> m = agent::GpuHealthMonitor::Start(
      std::move(options), [report, confirm = w.confirm](const agent::GpuHealthEvent& e) {
        confirm->NoteNvml(e);
        report(e);
      });
  if (m.ok()) {
    std::cerr << "hachi agent: " << node << ": GPU health: " << (*m)->summary() << "\n";
    w.nvml = std::move(*m);
  } else {
    std::cerr << "hachi agent: " << node
              << ": no NVML health checks: " << m.status().message() << "\n";
  }
  std::map<std::string, int> gpu_by_bus;
  if (Result<topo::Topology> t = topo::ParseTopologyJson(topology_json, "node"); t.ok()) {
    for (int g = 0; g < t->gpu_count(); ++g) {
      if (!t->gpu(g).pci_bus_id.empty()) gpu_by_bus[t->gpu(g).pci_bus_id] = g;
    }
  }
  // The monitor outlives the watcher: GpuWatch's members end in reverse order.
  const agent::GpuHealthMonitor* nvml = w.nvml.get();
  Result<std::unique_ptr<agent::KernelXidWatcher>> k = agent::KernelXidWatcher::Start(
      "/dev/kmsg", std::move(gpu_by_bus),
      [report, nvml, confirm = w.confirm](const agent::GpuHealthEvent& e) {
        report(confirm->Judge(e, nvml != nullptr && nvml->WatchesXids(e.gpu)));
      });
  if (k.ok()) {
    w.kernel_log = std::move(*k);
  } else {
    std::cerr << "hachi agent: " << node
              << ": no kernel-log Xid checks: " << k.status().message() << "\n";
  }
  return w;
}

// The GPU driver version NVML reports ("550.54.15"), "" without NVML: with the topology,
// what burn-in knows a node by.
std::string GpuDriverVersion() {
  Result<const topo::NvmlApi*> api = topo::LoadNvml(topo::ResolveNvmlLibrary(""));
  if (!api.ok() || (*api)->driver_version == nullptr) return "";
  if ((*api)->init() != topo::nvml::kSuccess) return "";
  char buf[topo::nvml::kSystemDriverVersionBufferSize] = {};
  std::string version;
  if ((*api)->driver_version(buf, sizeof buf) == topo::nvml::kSuccess) version = buf;
  (*api)->shutdown();
  return version;
}

// The node an agent runs on: a topology file or preset when given, else this machine's
// GPUs (NVML, then nvidia-smi). No GPUs and nothing given: an error that says what to do.
Result<NodeShape> AgentShape(const std::string& preset, const std::string& file) {
  if (!preset.empty()) return PresetShape(preset);
  NodeShape s;
  topo::LoadOptions lo;
  if (!file.empty()) lo.files = {file};
  Result<topo::Topology> t = topo::LoadTopology(lo);
  if (!t.ok()) {
    return Status(
        t.status().code(),
        t.status().message() +
            "; for a simulated node use --preset (hachi topo show --preset list)");
  }
  s.topology_json = topo::TopologyToJson(*t);
  s.cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  s.memory_mib = HostMemoryMib();
  s.what = file.empty() ? std::to_string(t->gpu_count()) + " GPUs of this machine" : file;
  return s;
}

std::string HostName() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf[0] ? std::string(buf) : std::string("localhost");
}

std::string DefaultStateDir() {
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.hachi/dev";
}

// Empty / 0: from the config's [server] table, else the default (flags win).
struct ServerFlags {
  std::string config, state_dir, listen, socket, policy;
  int agent_timeout = 0;
  int lease = 0;        // fencing (docs/fencing.md); 0: the agent timeout
  int kill_grace = 10;  // SIGTERM -> SIGKILL (ControllerOptions::kill_grace)
  int backfill_depth = 16;
  int history_interval =
      15;  // seconds between the dashboard's samples (server/history.h)
  int master_port_base = 29500;  // each node's MASTER_PORT range (ControllerOptions)
  int master_port_count = 1000;
  // What one user may have pending (ControllerOptions::max_pending_*); 0: no bound.
  int64_t max_pending_jobs = 10000;
  int64_t max_pending_bytes = int64_t{1} << 30;
  // The state database (docs/storage.md): --init makes a new one where the file lost
  // its schema; --accept-edited-rows keeps rows whose checksum does not match.
  bool init = false;
  bool accept_edited_rows = false;
  // Several controllers on PostgreSQL (docs/ha.md): the database's URI ("" = SQLite in
  // the state directory), the URL clients are sent to, the leader's lease in seconds.
  std::string store, advertise;
  double leader_lease = 6;
  // Who is asking (cli/auth_files.h): flags over the config's [auth] over the defaults.
  std::string cluster_secret_file, tls_cert, tls_key;
  std::optional<config::ClusterConfig> loaded;  // the parsed --config
};

// Loads --config and fills what the flags left open from its [server] table, then the
// defaults. `default_state_dir` differs for `server` and `dev`.
Status ResolveServerFlags(ServerFlags* f, const std::string& default_state_dir) {
  if (!f->config.empty()) {
    Result<config::ClusterConfig> c = config::LoadClusterConfig(f->config);
    if (!c.ok()) return c.status();
    f->loaded = std::move(*c);
    const config::ServerConfig& s = f->loaded->server;
    if (f->listen.empty()) f->listen = s.listen;
    if (f->socket.empty()) f->socket = s.socket;
    if (f->state_dir.empty()) f->state_dir = s.state_dir;
    if (f->policy.empty()) f->policy = s.policy;
    if (f->agent_timeout == 0) f->agent_timeout = static_cast<int>(s.agent_timeout);
  }
  if (f->listen.empty()) f->listen = "127.0.0.1:8686";
  if (f->state_dir.empty()) f->state_dir = default_state_dir;
  if (f->policy.empty()) f->policy = "hachi";
  if (f->agent_timeout <= 0) f->agent_timeout = 30;
  return Status::Ok();
}

Result<server::ControllerOptions> ControllerOptionsFrom(const ServerFlags& f) {
  server::ControllerOptions o;
  o.sched.policy = f.policy;
  o.sched.backfill_depth = f.backfill_depth;
  o.agent_timeout = f.agent_timeout;
  o.lease = f.lease;
  o.kill_grace = f.kill_grace;
  o.config = f.loaded;
  o.master_port_base = f.master_port_base;
  o.master_port_count = f.master_port_count;
  o.max_pending_jobs_per_user = f.max_pending_jobs;
  o.max_pending_bytes_per_user = f.max_pending_bytes;
  if (o.master_port_base + o.master_port_count > 65536) {
    return InvalidArgument("--master-port-base " + std::to_string(o.master_port_base) +
                           " with --master-port-count " +
                           std::to_string(o.master_port_count) + " goes past port 65535");
  }
  return o;
}

// The server part shared by `server` and `dev`: a controller and its API. With several
// controllers, one term of the leader's (cli/ha_server.h); destroyed, it stops.
struct RunningServer final : HaServer::Term {
  ~RunningServer() override {
    if (controller) controller->Stop();  // wakes long polls; no more writes
    if (history) history->Stop();
    if (http) http->Stop();
  }
  std::unique_ptr<server::Controller> controller;
  std::unique_ptr<server::HistorySampler> history;  // after controller, before http: it
                                                    // reads the one, the other reads it
  std::unique_ptr<server::HttpServer> http;
  std::string cluster_secret;  // what its agents send (hachi dev's are in this process)
};

// One server per state directory: two would both write the database.
// One process per directory: `what` ("server", "agent") names the kind in the error.
// The lock file is 0600: anyone who can open it can flock it and keep the daemon from
// starting.
Result<int> LockDir(const std::string& dir, const std::string& what) {
  const std::string path = dir + "/lock";
  HACHI_RETURN_IF_ERROR(CheckPrivateFile(path, 0600, std::cerr));
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (fd < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
    ::close(fd);
    return Unavailable(
        "another Hachi " + what + " uses the directory " + dir +
        (n > 0 ? " (pid " + std::string(pid, static_cast<size_t>(n)) + ")" : ""));
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) < 0) {
    // the pid is only for the message above
  }
  return fd;
}

// `local_nodes`: the agents in this process (hachi dev), whose job logs the dashboard may
// read from this disk.
// What a server process sets up once, whatever its store: its private state directory,
// the lock on it, the cluster secret.
struct ServerSetup {
  int lock_fd = -1;  // flock on STATE_DIR/lock, held for the process's life
  std::string socket;
  std::string cluster_secret;
};

Result<ServerSetup> PrepareServer(const ServerFlags& f, const std::string& state_dir) {
  // The HTTP server's 64 threads would each get a malloc arena that keeps what a big
  // reply freed: a few arenas serve them as well (the soak test's RSS, docs/soak.md).
  mallopt(M_ARENA_MAX, 4);
  ServerSetup setup;
  // The database holds every job's script and environment: the directory is the
  // server's alone, 0700, or 0711 when it holds the Unix socket users connect to (they
  // may pass through it to the socket, not list it); its files are 0600.
  setup.socket = f.socket.empty() ? state_dir + "/hachi.sock" : f.socket;
  const bool socket_inside = setup.socket.rfind(state_dir + "/", 0) == 0;
  HACHI_RETURN_IF_ERROR(
      EnsurePrivateDir(state_dir, socket_inside ? 0711 : 0700, std::cerr));
  Result<int> lock = LockDir(state_dir, "server");
  if (!lock.ok()) return lock.status();
  setup.lock_fd = *lock;
  HACHI_RETURN_IF_ERROR(ControllerOptionsFrom(f).status());
  const config::AuthConfig* auth = f.loaded ? &f.loaded->auth : nullptr;
  Result<std::string> secret =
      ServerClusterSecret(f.cluster_secret_file, auth, state_dir);
  if (!secret.ok()) return secret.status();
  setup.cluster_secret = *secret;
  return setup;
}

// The listeners and what they check, a leader's or a standby's (HttpOptions::leader).
Result<server::HttpOptions> ServerHttpOptions(const ServerFlags& f,
                                              const ServerSetup& setup) {
  const config::AuthConfig* auth = f.loaded ? &f.loaded->auth : nullptr;
  server::HttpOptions h;
  h.listen = f.listen;
  h.unix_socket = setup.socket;
  h.auth.cluster_secret = setup.cluster_secret;
  // [auth] anonymous_read is the Controller's Authorizer's (server/authorizer.h).
  // The names a browser may use (server/browser_host.h): the configured ones, the listen
  // address's host and this machine's hostname.
  if (auth != nullptr) h.auth.browser_hosts = auth->browser_hosts;
  if (const size_t colon = f.listen.rfind(':'); colon != std::string::npos && colon > 0) {
    h.auth.browser_hosts.push_back(f.listen.substr(0, colon));
  }
  if (char name[256] = {}; gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
    h.auth.browser_hosts.emplace_back(name);
  }
  h.tls_cert = !f.tls_cert.empty() || auth == nullptr ? f.tls_cert : auth->tls_cert;
  h.tls_key = !f.tls_key.empty() || auth == nullptr ? f.tls_key : auth->tls_key;
  HACHI_RETURN_IF_ERROR(CheckNotWorldReadable(h.tls_key, "--tls-key"));
  return h;
}

Result<std::unique_ptr<state::Store>> OpenSqlite(const ServerFlags& f,
                                                 const std::string& state_dir) {
  state::SqliteOptions db_options;
  db_options.initialize = f.init;
  db_options.accept_edited_rows = f.accept_edited_rows;
  db_options.warn = [](const std::string& line) {
    std::cerr << "hachi: " << line << "\n";
  };
  const std::string db = state_dir + "/hachi.db";
  for (const std::string& file : {db, db + "-wal", db + "-shm", db + "-journal"}) {
    HACHI_RETURN_IF_ERROR(CheckPrivateFile(file, 0600, std::cerr));
  }
  // SQLite creates the database 0644 & ~umask, and its -wal and -shm with the
  // database's mode: 0600 from their first byte, so nobody holds a descriptor opened
  // while they were wider.
  ScopedUmask private_files(077);
  return state::OpenSqliteStore(db, db_options);
}

// The controller on `store` and its HTTP API, running. `epoch`: the term's, with several
// controllers (docs/ha.md); 0 with one.
Result<std::unique_ptr<RunningServer>> StartTerm(const ServerFlags& f,
                                                 const ServerSetup& setup,
                                                 std::unique_ptr<state::Store> store,
                                                 int64_t epoch,
                                                 std::vector<std::string> local_nodes) {
  Result<server::ControllerOptions> opts = ControllerOptionsFrom(f);
  if (!opts.ok()) return opts.status();
  opts->credential_key = setup.cluster_secret;  // the jobs' credentials (server/auth.h)
  Result<std::unique_ptr<server::Controller>> c =
      server::Controller::Create(std::move(*opts), std::move(store));
  if (!c.ok()) return c.status();
  auto rs = std::make_unique<RunningServer>();
  rs->controller = std::move(*c);
  rs->cluster_secret = setup.cluster_secret;
  Result<server::HttpOptions> h = ServerHttpOptions(f, setup);
  if (!h.ok()) return h.status();
  h->epoch = epoch;
  rs->history = std::make_unique<server::HistorySampler>(
      rs->controller.get(), server::HistorySampler::Options{f.history_interval});
  h->dashboard.history = rs->history.get();
  h->dashboard.local_nodes = std::move(local_nodes);
  rs->http = std::make_unique<server::HttpServer>(rs->controller.get(), *h);
  HACHI_RETURN_IF_ERROR(rs->http->Start());
  rs->controller->Start();
  rs->history->Start();
  return rs;
}

// One server on SQLite: `server` and `dev`.
Result<std::unique_ptr<RunningServer>> StartServer(
    const ServerFlags& f, const std::string& state_dir,
    std::vector<std::string> local_nodes = {}) {
  Result<ServerSetup> setup = PrepareServer(f, state_dir);
  if (!setup.ok()) return setup.status();
  Result<std::unique_ptr<state::Store>> store = OpenSqlite(f, state_dir);
  if (!store.ok()) return store.status();
  return StartTerm(f, *setup, std::move(*store), 0, std::move(local_nodes));
}

void AddServerFlags(CLI::App* cmd, ServerFlags* f) {
  cmd->add_option("--config", f->config, "Cluster policy file (TOML, docs/config.md)");
  cmd->add_option("--state-dir", f->state_dir,
                  "Where the state database and socket live");
  cmd->add_option("--listen", f->listen,
                  "HOST:PORT for the REST API (default 127.0.0.1:8686)");
  cmd->add_option("--socket", f->socket,
                  "Unix socket path (default STATE_DIR/hachi.sock)");
  cmd->add_option("--policy", f->policy, "Scheduling policy: hachi, easy, fifo");
  cmd->add_option("--agent-timeout", f->agent_timeout,
                  "Seconds without an agent's poll before its node is down (default 30)");
  cmd->add_option("--lease", f->lease,
                  "Seconds an agent cut off from the server keeps its jobs before it "
                  "stops them (default: the agent timeout; docs/fencing.md)")
      ->check(CLI::Range(0, 86400));
  cmd->add_option("--kill-grace", f->kill_grace,
                  "Seconds from SIGTERM to SIGKILL when a job is stopped (default 10)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option(
      "--cluster-secret-file", f->cluster_secret_file,
      "The secret agents must send (default STATE_DIR/cluster-secret, created)");
  cmd->add_option("--tls-cert", f->tls_cert,
                  "PEM certificate: serve the TCP API over HTTPS");
  cmd->add_option("--tls-key", f->tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--history-interval", f->history_interval,
                  "Seconds between the dashboard's history samples (default 15)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--master-port-base", f->master_port_base,
                  "First port of each node's MASTER_PORT range (default 29500)")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--master-port-count", f->master_port_count,
                  "Ports in each node's MASTER_PORT range: the most jobs whose rank 0 "
                  "runs on one node at once (default 1000)")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--max-pending-jobs", f->max_pending_jobs,
                  "Jobs one user may have pending, an array's tasks each counted; a "
                  "submit past it is refused (default 10000; 0: no bound)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option(
         "--max-pending-bytes", f->max_pending_bytes,
         "Bytes of batch scripts, environments and arguments one user may have "
         "pending, an array's counted once (default 1073741824, 1 GiB; 0: no bound)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50));
  cmd->add_flag(
      "--init", f->init,
      "Make a new, empty state database where STATE_DIR/hachi.db exists but "
      "holds no Hachi tables (0 bytes, its schema lost), which is refused "
      "otherwise: job ids start again at 1. A missing file is created without it");
  cmd->add_option("--store", f->store,
                  "Keep the state in PostgreSQL (postgresql://user@host1,host2/db?"
                  "target_session_attrs=read-write), shared by several servers of which "
                  "one leads (docs/ha.md); default: SQLite in --state-dir");
  cmd->add_option("--advertise", f->advertise,
                  "The URL a standby sends clients and agents to when this server leads "
                  "(default: http://LISTEN-HOST:PORT, the host name for 0.0.0.0)");
  cmd->add_option(
         "--leader-lease", f->leader_lease,
         "Seconds a leader's lease runs unrenewed, with --store: a standby takes "
         "over within about this after the leader is lost; renewed every third "
         "(default 6)")
      ->check(CLI::Range(0.3, 600.0));
  cmd->add_flag("--accept-edited-rows", f->accept_edited_rows,
                "Keep state rows whose checksum does not match their record (edited "
                "outside hachi), naming each, instead of refusing to start");
}

// The cgroup holding an agent's job cgroups: "hachi" for the standard spool, else one
// per spool ("hachi-" and a hash of its path). Each agent kills the job cgroups it finds
// in its parent at start, and job ids repeat across clusters, so two agents on one
// machine (tests, simulated nodes, `hachi dev`) must not share one; one agent per spool
// is already enforced (LockDir).
std::string CgroupParentFor(const std::string& flag, const std::string& spool) {
  if (!flag.empty()) return flag;
  if (spool == "/var/spool/hachi") return "hachi";
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : spool) h = (h ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return std::string("hachi-") + hex;
}

// How the jobs of `node` are isolated (docs/isolation.md): the cgroup driver of `mode`
// (--cgroup), and each GPU's device minor (its index) and NUMA CPUs from the topology.
// Logged either way, since a node without cgroups still runs jobs. Errors: an explicit
// --cgroup v1 or v2 that cannot work here.
Result<agent::IsolationOptions> JobIsolation(const std::string& mode,
                                             const std::string& parent,
                                             const std::string& topology_json,
                                             const std::string& node, std::string* name,
                                             int64_t pids_reserve = -1) {
  agent::IsolationOptions iso;
  iso.pids_reserve = pids_reserve;
  // Where the MIG caps are read (docs/isolation.md "MIG devices"); tests with
  // the fake NVML point it at a fake /proc tree.
  if (const char* r = std::getenv("HACHI_MIG_CAPS_ROOT"); r != nullptr && *r != '\0') {
    iso.mig_caps_root = r;
  }
  if (Result<topo::Topology> t = topo::ParseTopologyJson(topology_json, "node"); t.ok()) {
    for (const topo::Gpu& g : t->gpus()) {
      agent::GpuPlacement p;
      p.minor = static_cast<unsigned>(g.index);
      if (Result<std::vector<int>> cpus = ParseCpuList(g.cpu_affinity); cpus.ok())
        p.cpus = *cpus;
      if (g.index >= static_cast<int>(iso.gpus.size())) iso.gpus.resize(g.index + 1);
      iso.gpus[g.index] = p;
    }
  }
  agent::CgroupOptions co;
  co.mode = mode.empty() ? "auto" : mode;
  co.parent = parent;
  Result<std::unique_ptr<agent::CgroupDriver>> d = agent::OpenCgroups(co);
  std::string why;
  if (d.ok()) {
    iso.cgroups = std::move(*d);
  } else if (co.mode == "auto") {
    why = d.status().message();
  } else {
    return d.status();
  }
  *name = std::string(iso.cgroups ? agent::CgroupModeName(iso.cgroups->mode()) : "none");
  std::cerr << "hachi agent: " << node << ": job isolation: cgroup "
            << agent::Isolation(iso).Describe(why) << "\n";
  return iso;
}

// How a node's GPU shares are isolated (docs/isolation.md "GPU shares"): the
// MPS control daemons that serve them when MPS can (`mode` auto/on/off, `control` the
// binary), with their directories under `dir`; else null, the agent's soft limit
// guarding them. `daemon` is where its events go once the agent exists. The node
// record's words for it go to `*sharing`; logged either way.
std::shared_ptr<agent::MpsDaemons> GpuSharing(
    const std::string& mode, const std::string& control, const std::string& dir,
    bool simulated, const std::string& topology_json, const std::string& node,
    std::shared_ptr<std::atomic<agent::AgentDaemon*>> daemon, std::string* sharing) {
  std::vector<std::string> models, devices;
  if (Result<topo::Topology> t = topo::ParseTopologyJson(topology_json, "node"); t.ok()) {
    for (const topo::Gpu& g : t->gpus()) {
      models.push_back(g.model);
      devices.push_back(g.uuid.empty() ? std::to_string(g.index) : g.uuid);
    }
  }
  std::string path;
  const std::string why = agent::MpsUnavailable(mode, control, simulated, models, &path);
  if (!why.empty()) {
    *sharing = "soft-limit: " + why;
    std::cerr << "hachi agent: " << node << ": GPU shares: no MPS (" << why
              << "); the agent ends a share that uses more GPU memory than promised\n";
    return nullptr;
  }
  *sharing = "mps";
  agent::MpsOptions o;
  o.control = path;
  o.dir = dir;
  o.devices = std::move(devices);
  o.on_event = [daemon, node](int gpu, const std::string& kind, const std::string& msg) {
    std::cerr << "hachi agent: " << node << ": " << msg << "\n";
    if (agent::AgentDaemon* d = daemon->load()) {
      d->ReportHealth(api::GpuHealthEvent{gpu, kind, 0, "info", msg, RealClock()->Now()});
    }
  };
  std::cerr << "hachi agent: " << node
            << ": GPU shares: an MPS control daemon per shared "
            << "GPU (" << path << ", in " << dir << ")\n";
  return std::make_shared<agent::MpsDaemons>(std::move(o));
}

std::unique_ptr<agent::Launcher> RealLauncher(
    const std::string& spool, const std::string& container_runtime,
    agent::IsolationOptions iso, const std::string& topology_json,
    const std::string& server, const std::string& node,
    std::shared_ptr<agent::LeaseFile> lease, agent::LauncherEvents events) {
  // Scripts (0700, the user's) and exit files (0600): their names are not for others
  // to list; the jobs' users pass through it to their scripts.
  Status made = EnsurePrivateDir(spool, 0711, std::cerr);
  if (!made.ok()) std::cerr << "hachi: warning: " << made.message() << "\n";
  agent::ProcessLauncher::Options lo;
  lo.spool_dir = spool;
  lo.container.kind = container_runtime;  // docker | podman | apptainer; "" = none
  lo.container.binary = container_runtime;
  lo.isolation = std::move(iso);
  // NCCL_IB_HCA: the NICs beside each job's GPUs (agent/nccl_env.h), when the topology
  // names them.
  if (Result<topo::Topology> t = topo::ParseTopologyJson(topology_json, "node"); t.ok()) {
    lo.gpu_nics = agent::NearestNics(*t);
  }
  // A waiter waits for each job (agent/waiter.h), so jobs outlive a restart of the agent
  // and the next one adopts them: the small hachi-job-waiter beside this binary, else
  // this very binary (`hachi __job-waiter`).
  lo.waiter = agent::FindWaiterBinary(SelfExe(), "/proc/self/exe");
  // Each waiter stops its job once the node's lease has passed (agent/lease_file.h): a
  // run whose agent died ends before the server starts its job elsewhere.
  lo.lease_file = std::move(lease);
  lo.node = node;
  // srun inside a job finds the server as this agent does (with HACHI_JOB_TOKEN).
  lo.job_env = {{"HACHI_SERVER", server}};
  lo.signal_steps = std::move(events.signal_steps);
  auto launcher = std::make_unique<agent::ProcessLauncher>(lo, std::move(events.on_exit));
  // What it did with the runs an earlier agent left: "adopted" / "stopped".
  auto say = [&spool](const char* what, const std::vector<std::string>& runs) {
    if (runs.empty()) return;
    std::cerr << "hachi agent: " << what << " " << runs.size()
              << " run(s) an earlier agent left running in " << spool << ":";
    for (const std::string& r : runs) std::cerr << " " << r;
    std::cerr << "\n";
  };
  say("adopted", launcher->runs_adopted());
  say("stopped", launcher->leftovers_stopped());
  return launcher;
}

// ---- hachi server ----

// --store: "" (SQLite in the state directory) or PostgreSQL's URI.
bool IsPostgres(const std::string& store) {
  return store.rfind("postgresql://", 0) == 0 || store.rfind("postgres://", 0) == 0;
}

// The URL clients and agents are told (a standby's answer): --advertise, else the
// listen address when it names a host, else this host's name with the port.
std::string AdvertisedUrl(const ServerFlags& f) {
  if (!f.advertise.empty()) return f.advertise;
  const std::string scheme = f.tls_cert.empty() ? "http://" : "https://";
  const size_t colon = f.listen.rfind(':');
  const std::string host = f.listen.substr(0, colon);
  const std::string port =
      colon == std::string::npos ? "8686" : f.listen.substr(colon + 1);
  const bool any = host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::";
  return scheme + (any ? HostName() : host) + ":" + port;
}

// Several controllers on one PostgreSQL database (docs/ha.md): lead when the lease is
// ours, else answer as a standby, until a stop signal.
int RunHaServer(const ServerFlags& f, const ServerSetup& setup, const sigset_t& stop) {
  HaServer::Options o;
  o.conninfo = f.store;
  o.leadership.address = AdvertisedUrl(f);
  const auto lease =
      std::chrono::milliseconds(static_cast<int64_t>(f.leader_lease * 1000));
  o.leadership.lease = lease;
  o.leadership.renew = lease / 3;
  o.leadership.retry = lease / 6;
  Result<server::HttpOptions> h = ServerHttpOptions(f, setup);
  if (!h.ok()) return Fail(h.status());
  o.standby = *h;
  auto start_term = [&f, &setup](int64_t epoch,
                                 std::function<void(const Status&)> deposed,
                                 std::function<Result<state::StateImage>()> warm)
      -> Result<std::unique_ptr<HaServer::Term>> {
    state::PostgresOptions po;
    po.epoch = epoch;
    po.on_deposed = std::move(deposed);
    po.first_load = std::move(warm);
    // A write waiting past the lease for the database would be refused anyway.
    po.reconnect_ms = static_cast<int>(f.leader_lease * 1000);
    po.idle_in_transaction_ms = static_cast<int>(f.leader_lease * 1000);
    po.warn = [](const std::string& line) { std::cerr << "hachi: " << line << "\n"; };
    Result<std::unique_ptr<state::Store>> store = state::OpenPostgresStore(f.store, po);
    if (!store.ok()) return store.status();
    Result<std::unique_ptr<RunningServer>> rs =
        StartTerm(f, setup, std::move(*store), epoch, {});
    if (!rs.ok()) return rs.status();
    return std::unique_ptr<HaServer::Term>(std::move(*rs));
  };
  Result<std::unique_ptr<HaServer>> ha = HaServer::Start(o, start_term);
  if (!ha.ok()) return Fail(ha.status());
  std::cerr << "hachi server: one of several on PostgreSQL, listening on " << f.listen
            << " and unix:" << setup.socket << " as " << o.leadership.address
            << "; lease " << f.leader_lease << " s\n";
  WaitStopSignal(stop);
  (*ha)->Stop();
  return 0;
}

int RunServer(ServerFlags* f) {
  const sigset_t stop = BlockStopSignals();
  Status resolved = ResolveServerFlags(f, "/var/lib/hachi");
  if (!resolved.ok()) return Fail(resolved);
  const std::string dir = f->state_dir;
  if (!f->store.empty() && !IsPostgres(f->store)) {
    return Fail(InvalidArgument(
        "--store: expected a PostgreSQL URI (postgresql://[user@]host[:port][,host2...]/"
        "dbname[?param=value]); without --store the state is SQLite's, in --state-dir"));
  }
  if (IsPostgres(f->store)) {
    if (f->accept_edited_rows) {
      return Fail(InvalidArgument("--accept-edited-rows is for the SQLite store"));
    }
    Result<ServerSetup> setup = PrepareServer(*f, dir);
    if (!setup.ok()) return Fail(setup.status());
    return RunHaServer(*f, *setup, stop);
  }
  Result<std::unique_ptr<RunningServer>> rs = StartServer(*f, dir);
  if (!rs.ok()) return Fail(rs.status());
  std::cerr << "hachi server: listening on " << (*rs)->http->url()
            << " and unix:" << (*rs)->http->unix_socket() << "; state in " << dir
            << "/hachi.db\n";
  WaitStopSignal(stop);
  rs->reset();  // the controller, then the HTTP server
  return 0;
}

// ---- hachi agent ----

struct AgentFlags {
  std::string server, name, address, preset, topology_file, spool_dir, container_runtime,
      cgroup = "auto", cgroup_parent, cluster_secret_file, mps = "auto", mps_control,
      mps_dir;
  int64_t pids_reserve = -1;
  double usage_interval = 10;
};

void AddAgentFlags(CLI::App* agt, AgentFlags* af) {
  agt->add_option("--server", af->server, ServerFlagHelp());
  agt->add_option("--name", af->name, "Node name (default: the host name)");
  agt->add_option("--address", af->address,
                  "Address other nodes reach this one at (MASTER_ADDR); default: the "
                  "address the server sees this agent connect from");
  agt->add_option("--preset", af->preset,
                  "Simulate a node of this preset instead of real GPUs");
  agt->add_option("--topology-file", af->topology_file,
                  "Simulate a node from a topology file");
  agt->add_option("--spool-dir", af->spool_dir,
                  "Where job scripts are kept (default /var/spool/hachi)");
  agt->add_option("--cluster-secret-file", af->cluster_secret_file,
                  "The server's cluster secret (default $HACHI_CLUSTER_SECRET_FILE or "
                  "/var/lib/hachi/cluster-secret)");
  agt->add_option("--container-runtime", af->container_runtime,
                  "Runs --container-image jobs: docker, podman or apptainer")
      ->check(CLI::IsMember({"docker", "podman", "apptainer"}));
  agt->add_option("--cgroup", af->cgroup,
                  "Per-job cgroups: auto (default), v1, v2 or none (docs/isolation.md)")
      ->check(CLI::IsMember({"auto", "v1", "v2", "none"}));
  agt->add_option("--cgroup-parent", af->cgroup_parent,
                  "The cgroup holding the jobs' cgroups (default hachi; with "
                  "--spool-dir, one per spool)");
  agt->add_option("--pids-reserve", af->pids_reserve,
                  "Pids kept for the agent and the system: jobs' pids.max together stay "
                  "under min(kernel.pid_max, threads-max) minus this (default the larger "
                  "of 4096 and a tenth of it; docs/isolation.md)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  agt->add_option("--mps", af->mps,
                  "GPU shares through an MPS server per shared GPU: auto (default: on "
                  "real Volta or newer GPUs with nvidia-cuda-mps-control), on or off; "
                  "without MPS, shares run under a soft GPU memory limit "
                  "(docs/isolation.md)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  agt->add_option("--mps-control", af->mps_control,
                  "The nvidia-cuda-mps-control binary (default: found in PATH)");
  agt->add_option("--mps-dir", af->mps_dir,
                  "The MPS daemons' pipe and log directories, one per GPU (default "
                  "SPOOL/mps)");
  agt->add_option("--usage-interval", af->usage_interval,
                  "Seconds between samples of each running job's GPUs (NVML), CPU time "
                  "and memory (cgroup); 0: none (default 10; docs/efficiency.md)")
      ->check(CLI::Range(0.0, 3600.0));
}

// The node as the flags describe it: its shape (real or simulated), the server and its
// cluster secret, its name and address.
Result<agent::AgentOptions> AgentOptionsFrom(const AgentFlags& af, NodeShape* shape) {
  Result<NodeShape> got = AgentShape(af.preset, af.topology_file);
  if (!got.ok()) return got.status();
  *shape = *got;
  agent::AgentOptions o;
  o.server = api::ResolveServer(af.server);
  Result<std::string> secret = AgentClusterSecret(af.cluster_secret_file);
  if (!secret.ok()) return secret.status();
  o.cluster_secret = *secret;
  o.node = af.name.empty() ? HostName() : af.name;
  o.address = af.address;
  o.topology_json = shape->topology_json;
  o.cpus = shape->cpus;
  o.memory_mib = shape->memory_mib;
  o.simulated = !af.preset.empty() || !af.topology_file.empty();
  if (!o.simulated) o.gpu_driver = GpuDriverVersion();
  return o;
}

int RunAgent(const AgentFlags& af) {
  const sigset_t stop = BlockStopSignals();
  // A server that closes a connection the agent is writing to (a refusal, a restart)
  // must cost a failed request and a retry, not the agent: SIGPIPE would end it with
  // its jobs left running unmanaged. Jobs and steps get every signal back to its
  // default before their exec (agent/spawn.cc).
  ::signal(SIGPIPE, SIG_IGN);
  NodeShape shape;
  Result<agent::AgentOptions> opts = AgentOptionsFrom(af, &shape);
  if (!opts.ok()) return Fail(opts.status());
  agent::AgentOptions& o = *opts;
  const std::string spool = af.spool_dir.empty() ? "/var/spool/hachi" : af.spool_dir;
  // One agent per spool: a second one would stop the first one's runs as leftovers.
  if (Status made = EnsurePrivateDir(spool, 0711, std::cerr); !made.ok()) {
    return Fail(made);
  }
  Result<int> spool_lock = LockDir(spool, "agent");
  if (!spool_lock.ok()) return Fail(spool_lock.status());
  // No lease in it until the agent's lease code first holds one (agent/lease_file.h).
  Result<std::unique_ptr<agent::LeaseFile>> lease =
      agent::LeaseFile::Open(spool + "/" + agent::kLeaseFileName);
  if (!lease.ok()) return Fail(lease.status());
  o.lease_file = std::move(*lease);
  // The highest leader epoch seen, kept across the agent's restarts (docs/ha.md).
  Result<std::shared_ptr<api::EpochFloor>> floor =
      api::EpochFloor::Open(spool + "/epoch");
  if (!floor.ok()) return Fail(floor.status());
  o.epoch_floor = std::move(*floor);
  const std::string runtime = af.container_runtime;
  Result<agent::IsolationOptions> iso =
      JobIsolation(af.cgroup, CgroupParentFor(af.cgroup_parent, spool), o.topology_json,
                   o.node, &o.cgroup, af.pids_reserve);
  if (!iso.ok()) return Fail(iso.status());
  auto events = std::make_shared<std::atomic<agent::AgentDaemon*>>(nullptr);
  o.mps =
      GpuSharing(af.mps, af.mps_control, af.mps_dir.empty() ? spool + "/mps" : af.mps_dir,
                 o.simulated, o.topology_json, o.node, events, &o.gpu_sharing);
  SampleUsage(af.usage_interval, o.simulated, &o);
  agent::AgentDaemon d(
      o, [spool, runtime, iso = *iso, topology = o.topology_json, server = o.server,
          node = o.node, lease = o.lease_file](agent::LauncherEvents launcher_events) {
        return RealLauncher(spool, runtime, iso, topology, server, node, lease,
                            std::move(launcher_events));
      });
  events->store(&d);
  Status s = d.Start();
  if (!s.ok()) return Fail(s);
  std::cerr << "hachi agent: node " << o.node << " (" << shape.what << "), server "
            << o.server << "\n";
  // Real GPUs only: a simulated node has none to watch.
  GpuWatch health;
  if (af.preset.empty() && af.topology_file.empty()) {
    health = WatchGpus(&d, o.node, o.topology_json);
  }
  WaitStopSignal(stop);
  health.Stop();
  d.Stop(/*cancel_jobs=*/false);
  return 0;
}

// ---- hachi dev ----

struct DevFlags {
  ServerFlags server;
  int nodes = 2;
  std::string preset = "hgx-h100";
  std::string container_runtime;
  std::string cgroup = "none";  // simulated nodes share this machine's devices
  std::string mps = "auto", mps_control;
  double usage_interval = 10;
};

void AddDevFlags(CLI::App* dev, DevFlags* df) {
  AddServerFlags(dev, &df->server);
  dev->add_option("--nodes", df->nodes, "Simulated nodes (default 2)")
      ->check(CLI::Range(1, 64));
  dev->add_option("--preset", df->preset,
                  "Preset of the simulated nodes (default hgx-h100)");
  dev->add_option("--container-runtime", df->container_runtime,
                  "Runs --container-image jobs: docker, podman or apptainer")
      ->check(CLI::IsMember({"docker", "podman", "apptainer"}));
  dev->add_option("--cgroup", df->cgroup,
                  "Per-job cgroups: none (default), auto, v1 or v2 (docs/isolation.md)")
      ->check(CLI::IsMember({"auto", "v1", "v2", "none"}));
  dev->add_option("--mps", df->mps,
                  "GPU shares through MPS: auto (default: on real GPUs with "
                  "nvidia-cuda-mps-control), on or off (docs/isolation.md)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  dev->add_option("--mps-control", df->mps_control,
                  "The nvidia-cuda-mps-control binary (default: found in PATH)");
  dev->add_option("--usage-interval", df->usage_interval,
                  "Seconds between samples of each running job's GPUs, CPU time and "
                  "memory; 0: none (default 10; docs/efficiency.md)")
      ->check(CLI::Range(0.0, 3600.0));
}

// hachi dev's nodes: this machine when NVML finds GPUs on it (one node), else
// `df.nodes` simulated ones of `df.preset`.
struct DevNodes {
  std::vector<NodeShape> shapes;
  std::vector<std::string> names;
  bool real_gpus = false;
};

Result<DevNodes> DevNodesFor(const DevFlags& df) {
  DevNodes n;
  if (Result<topo::Topology> real = topo::DiscoverLocalTopology();
      real.ok() && real->gpu_count() > 0) {
    Result<NodeShape> s = AgentShape("", "");
    if (s.ok()) {
      n.shapes.push_back(*s);
      n.names.push_back(HostName());
      n.real_gpus = true;
    }
  }
  if (n.shapes.empty()) {
    Result<NodeShape> s = PresetShape(df.preset);
    if (!s.ok()) return s.status();
    for (int i = 1; i <= df.nodes; ++i) {
      n.shapes.push_back(*s);
      n.names.push_back("node" + std::to_string(i));
    }
  }
  return n;
}

// The agent of node `i`, in this process, started.
Result<std::unique_ptr<agent::AgentDaemon>> StartDevAgent(const DevFlags& df,
                                                          const DevNodes& nodes, size_t i,
                                                          const RunningServer& rs) {
  agent::AgentOptions o;
  o.server = rs.http->url();
  o.cluster_secret = rs.cluster_secret;
  o.node = nodes.names[i];
  o.address = "127.0.0.1";
  o.topology_json = nodes.shapes[i].topology_json;
  o.cpus = nodes.shapes[i].cpus;
  o.memory_mib = nodes.shapes[i].memory_mib;
  o.simulated = !nodes.real_gpus;
  if (nodes.real_gpus) o.gpu_driver = GpuDriverVersion();
  const std::string spool = df.server.state_dir + "/spool/" + nodes.names[i];
  Result<agent::IsolationOptions> iso = JobIsolation(
      df.cgroup, CgroupParentFor("", spool), o.topology_json, o.node, &o.cgroup);
  if (!iso.ok()) return iso.status();
  auto events = std::make_shared<std::atomic<agent::AgentDaemon*>>(nullptr);
  o.mps = GpuSharing(df.mps, df.mps_control, spool + "/mps", o.simulated, o.topology_json,
                     o.node, events, &o.gpu_sharing);
  SampleUsage(df.usage_interval, o.simulated, &o);
  // Jobs reach the server on its socket: the kernel says who they are.
  auto a = std::make_unique<agent::AgentDaemon>(
      o, [spool, runtime = df.container_runtime, iso = *iso, topology = o.topology_json,
          server = "unix:" + rs.http->unix_socket(),
          node = o.node](agent::LauncherEvents launcher_events) {
        // No lease file: the server and its agents are one process, no agent dies alone.
        return RealLauncher(spool, runtime, iso, topology, server, node, nullptr,
                            std::move(launcher_events));
      });
  events->store(a.get());
  HACHI_RETURN_IF_ERROR(a->Start());
  return a;
}

int RunDev(DevFlags* df) {
  const sigset_t stop = BlockStopSignals();
  Status resolved = ResolveServerFlags(&df->server, DefaultStateDir());
  if (!resolved.ok()) return Fail(resolved);
  if (!df->server.store.empty()) {
    return Fail(InvalidArgument(
        "--store is for hachi server (several controllers on PostgreSQL, docs/ha.md); "
        "hachi dev keeps its state in SQLite in --state-dir"));
  }
  const std::string dir = df->server.state_dir;
  Result<DevNodes> nodes = DevNodesFor(*df);
  if (!nodes.ok()) return Fail(nodes.status());
  Result<std::unique_ptr<RunningServer>> started =
      StartServer(df->server, dir, nodes->names);
  if (!started.ok()) return Fail(started.status());
  RunningServer* rs = started->get();
  const std::string url = rs->http->url();
  std::vector<std::unique_ptr<agent::AgentDaemon>> agents;
  for (size_t i = 0; i < nodes->shapes.size(); ++i) {
    Result<std::unique_ptr<agent::AgentDaemon>> a = StartDevAgent(*df, *nodes, i, *rs);
    if (!a.ok()) return Fail(a.status());
    agents.push_back(std::move(*a));
  }
  GpuWatch health;
  if (nodes->real_gpus) {
    health = WatchGpus(agents.front().get(), nodes->names.front(),
                       nodes->shapes.front().topology_json);
  }
  std::cerr << "hachi dev: listening on " << url << " (unix:" << rs->http->unix_socket()
            << "), " << nodes->shapes.size() << " node(s): " << nodes->shapes[0].what
            << "; state in " << dir << "\n"
            << "  try: HACHI_SERVER=unix:" << rs->http->unix_socket()
            << " hachi run --gpus 2 -- nvidia-smi -L\n"
            << "  dashboard: " << url << "/\n";
  WaitStopSignal(stop);
  std::cerr << "hachi dev: stopping (cancelling running jobs)\n";
  health.Stop();
  // Jobs first, while the server still records their ends; then the server, whose
  // stop wakes the agents' long polls; then the agents and the HTTP threads.
  std::vector<std::thread> cancels;
  for (auto& a : agents) {
    cancels.emplace_back([&a] { a->CancelAll(15000); });
  }
  for (std::thread& t : cancels) t.join();
  rs->controller->Stop();
  for (auto& a : agents) a->Stop(/*cancel_jobs=*/true);
  rs->http->Stop();
  return 0;
}

}  // namespace

// Each command's flags live as long as the app (shared with its callback); its run
// returns the exit code, which stays as it was on success.
void AddDaemonCommands(CLI::App& app, int* exit_code) {
  auto set_code = [exit_code](int rc) {
    if (rc != 0) *exit_code = rc;
  };

  auto sf = std::make_shared<ServerFlags>();
  CLI::App* srv =
      app.add_subcommand("server", "Run the controller (REST API, scheduler, state)");
  AddServerFlags(srv, sf.get());
  srv->callback([sf, set_code] { set_code(RunServer(sf.get())); });

  auto af = std::make_shared<AgentFlags>();
  CLI::App* agt =
      app.add_subcommand("agent", "Run the node agent: discover GPUs, run jobs");
  AddAgentFlags(agt, af.get());
  agt->callback([af, set_code] { set_code(RunAgent(*af)); });

  auto df = std::make_shared<DevFlags>();
  CLI::App* dev = app.add_subcommand(
      "dev",
      "Server and agents in one process, on localhost (simulated nodes without GPUs)");
  AddDevFlags(dev, df.get());
  dev->callback([df, set_code] { set_code(RunDev(df.get())); });
}

}  // namespace hachi::cli
