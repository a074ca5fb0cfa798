// A real PostgreSQL 15 (Debian's postgresql-15) that a test starts and stops itself:
// initdb in a new directory, trust authentication, its Unix socket in that directory,
// fsync on (durability is what the tests are about), and, when the test runs as root,
// every PostgreSQL command run as `nobody` (PostgreSQL refuses root). Optionally on a
// TCP address (a network-namespace host's, `prefix` running each command there) and as
// a streaming standby of another one (the promotion case).
//
// Under ctest every case of a test binary is a process of its own: one server for all of
// them is started by the fixture test hachi_postgres (pg_fixture_main.cc, CMake's
// FIXTURES_REQUIRED), which names its directory in $HACHI_SHARED_POSTGRES; each case
// then makes a database of its own on it (FreshPostgresDatabase), and a case that stops
// or kills its server starts one of its own.
//
// Test-only, header-only. Not thread-safe: one test thread drives it. Every wait is
// bounded (pg_ctl -w -t 30).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hachi::state::testing {

inline constexpr const char* kPostgresBin = "/usr/lib/postgresql/15/bin";

// Why PostgreSQL cannot be started here ("" when it can); a developer's machine without
// it sets HACHI_NO_POSTGRES=1 to skip (CI has it: scripts/install-deps.sh).
inline std::string PostgresMissing() {
  if (std::filesystem::exists(std::string(kPostgresBin) + "/pg_ctl")) return "";
  return std::string(kPostgresBin) +
         "/pg_ctl is missing: install Debian's postgresql-15 (scripts/install-deps.sh), "
         "or set HACHI_NO_POSTGRES=1 to skip the PostgreSQL tests";
}
inline bool SkipPostgres() {
  const char* v = std::getenv("HACHI_NO_POSTGRES");
  return v != nullptr && std::string(v) == "1";
}

class ScratchPostgres {
 public:
  struct Options {
    std::string parent = "/tmp";  // where its directory is made
    std::string dir;              // that directory, made here ("": a new name)
    std::string listen;           // a TCP address too; "" = the Unix socket only
    int port = 0;                 // 0: pick (a free one on `listen`)
    std::string prefix;           // shell words before every command ("ip netns exec N")
  };

  explicit ScratchPostgres(Options options) : o_(std::move(options)) {
    PickPort();
    if (!PostgresMissing().empty()) {
      error_ = PostgresMissing();
      return;
    }
    if (!MakeDir()) return;
    ok_ = InitDb(Data(), dir_ + "/initdb.log") && Configure() && Start() &&
          Sh(Pg("createdb") + " -h " + dir_ + " -p " + std::to_string(o_.port) +
             " -U hachi hachi >>" + dir_ + "/initdb.log 2>&1");
    if (!ok_ && error_.empty()) error_ = "could not start PostgreSQL:\n" + Logs();
  }
  ScratchPostgres() : ScratchPostgres(Options{}) {}
  // The server another process started in `dir` (the fixture's), not stopped or removed
  // by this handle; ok() when it runs.
  static std::unique_ptr<ScratchPostgres> Attach(const std::string& dir, int port) {
    Options o;
    o.port = port;
    auto s = std::unique_ptr<ScratchPostgres>(new ScratchPostgres(std::move(o), 0));
    s->dir_ = dir;
    s->owned_ = false;
    s->ok_ = s->Sh(s->Pg("pg_ctl") + " -D " + s->Data() + " status >/dev/null 2>&1");
    if (!s->ok_) s->error_ = "no PostgreSQL runs in " + dir;
    return s;
  }
  // Leaves the server running and its directory in place when this handle goes.
  void Release() { owned_ = false; }
  // An initdb'd data directory at `dir`/template that every ScratchPostgres of the
  // processes given $HACHI_SHARED_POSTGRES=`dir` copies instead of running initdb
  // (seconds each, on two busy cores; a copy takes a tenth of one).
  bool MakeTemplate() { return InitDb(dir_ + "/template", dir_ + "/template.log"); }

  ~ScratchPostgres() {
    if (owned_ && !dir_.empty()) {
      Kill();  // what pg_ctl's immediate stop does, without waiting for the reaper
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  ScratchPostgres(const ScratchPostgres&) = delete;
  ScratchPostgres& operator=(const ScratchPostgres&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int port() const { return o_.port; }
  const std::string& dir() const { return dir_; }

  // The URI of database `db` on the Unix socket (the directory, percent-encoded).
  std::string conninfo(const std::string& db = "hachi") const {
    std::string enc;
    for (char c : dir_) enc += c == '/' ? std::string("%2F") : std::string(1, c);
    return "postgresql://hachi@" + enc + ":" + std::to_string(o_.port) + "/" + db;
  }
  std::string conninfo_tcp(const std::string& db = "hachi") const {
    return "postgresql://hachi@" + o_.listen + ":" + std::to_string(o_.port) + "/" + db;
  }

  // A new, empty database for one test.
  bool CreateDatabase(const std::string& name) {
    return Sh(Pg("createdb") + " -h " + dir_ + " -p " + std::to_string(o_.port) +
              " -U hachi " + name + " >>" + dir_ + "/initdb.log 2>&1");
  }
  // SQL through psql (the tests' side door: pg_terminate_backend, settings).
  bool Psql(const std::string& sql, const std::string& db = "hachi") {
    return Sh(Pg("psql") + " -h " + dir_ + " -p " + std::to_string(o_.port) +
              " -U hachi -d " + db + " -v ON_ERROR_STOP=1 -qAtc " + Quote(sql) + " >>" +
              dir_ + "/psql.log 2>&1");
  }

  bool Start() {
    return Sh(Pg("pg_ctl") + " -D " + Data() + " -l " + dir_ + "/postgres.log -w -t 30 " +
              "start >/dev/null 2>&1");
  }
  bool Stop() {
    return Sh(Pg("pg_ctl") + " -D " + Data() + " -m fast -w -t 30 stop >/dev/null 2>&1");
  }
  bool Restart() { return Stop() && Start(); }
  // SIGKILL of the postmaster and of its backends, as a crash of its host leaves them
  // (a backend left alone would go on committing, and hold the shared memory a new
  // server needs). Returns once they are dead; their lock files, naming pids that no
  // longer run, are removed as a restarted host finds them stale (whoever reaps the
  // processes may take seconds, and a zombie's pid still looks alive to PostgreSQL).
  void Kill() {
    const pid_t postmaster = Postmaster();
    if (postmaster <= 0) return;
    ::kill(postmaster, SIGSTOP);  // forks no more backends meanwhile
    std::vector<pid_t> all = Children(postmaster);
    all.push_back(postmaster);
    for (pid_t p : all) ::kill(p, SIGKILL);
    for (int i = 0; i < 10000 && !AllDead(all); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // bounded: 10 s
    }
    std::error_code ec;
    std::filesystem::remove(Data() + "/postmaster.pid", ec);
    std::filesystem::remove(dir_ + "/.s.PGSQL." + std::to_string(o_.port) + ".lock", ec);
  }
  // A streaming standby of this server, in a directory of its own (pg_basebackup -R),
  // with `options`' address and prefix; this one is made to commit only once the
  // standby has the transaction (synchronous replication: a promotion loses nothing
  // acknowledged).
  std::unique_ptr<ScratchPostgres> StartStandby(Options options) {
    auto s = std::unique_ptr<ScratchPostgres>(new ScratchPostgres(std::move(options), 0));
    if (!s->MakeDir()) return s;
    const std::string primary =
        o_.listen.empty() ? "-h " + dir_ + " -p " + std::to_string(o_.port)
                          : "-h " + o_.listen + " -p " + std::to_string(o_.port);
    s->ok_ = Sh(s->Pg("pg_basebackup") + " " + primary + " -U hachi -D " + s->Data() +
                " -R -X stream --no-sync >" + s->dir_ + "/initdb.log 2>&1") &&
             s->Configure() && s->Start() &&
             Psql("ALTER SYSTEM SET synchronous_standby_names = '*'") &&
             Psql("SELECT pg_reload_conf()");
    if (!s->ok_ && s->error_.empty())
      s->error_ = "could not start the standby:\n" + s->Logs();
    return s;
  }
  bool Promote() {
    return Sh(Pg("pg_ctl") + " -D " + Data() + " -w -t 30 promote >/dev/null 2>&1");
  }

 private:
  ScratchPostgres(Options options, int) : o_(std::move(options)) { PickPort(); }
  // A Unix socket alone lives in this server's directory: any port will do. A TCP one:
  // one free now on that address (bound to port 0, then let go); behind a prefix (another
  // network namespace) the address cannot be tried from here: one from the pid.
  void PickPort() {
    if (o_.port != 0) return;
    o_.port = 20000 + ::getpid() % 20000;
    if (o_.listen.empty() || !o_.prefix.empty()) return;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    socklen_t len = sizeof a;
    if (fd >= 0 && ::inet_pton(AF_INET, o_.listen.c_str(), &a.sin_addr) == 1 &&
        ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      o_.port = ntohs(a.sin_port);
    }
    if (fd >= 0) ::close(fd);
  }
  static std::string Quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }
  static bool Sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }
  // A new data directory at `data`: a copy of the fixture's template when there is one
  // (MakeTemplate), else initdb's.
  bool InitDb(const std::string& data, const std::string& log) const {
    if (const char* shared = std::getenv("HACHI_SHARED_POSTGRES"); shared && *shared) {
      const std::string tmpl = std::string(shared) + "/template";
      if (std::filesystem::exists(tmpl + "/PG_VERSION") && data != tmpl) {
        return Sh(AsPostgres("cp -a " + tmpl + " " + data) + " >" + log + " 2>&1");
      }
    }
    return Sh(Pg("initdb") + " -D " + data + " -A trust -U hachi -E UTF8 --locale=C " +
              "--no-sync >" + log + " 2>&1");
  }
  // The postmaster of this data directory, or 0 (none runs: a pid in a stale
  // postmaster.pid may be another process's by now).
  pid_t Postmaster() const {
    std::ifstream pid_file(Data() + "/postmaster.pid");
    long p = 0;
    if (!(pid_file >> p) || p <= 0) return 0;
    std::ifstream cmdline("/proc/" + std::to_string(p) + "/cmdline");
    std::string args((std::istreambuf_iterator<char>(cmdline)),
                     std::istreambuf_iterator<char>());
    return args.find(Data()) != std::string::npos ? static_cast<pid_t>(p) : 0;
  }
  // Whether each of `pids` has exited (a zombie, or gone).
  static bool AllDead(const std::vector<pid_t>& pids) {
    for (pid_t p : pids) {
      std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
      std::string line;
      if (!std::getline(stat, line)) continue;  // gone
      const size_t paren = line.rfind(')');
      if (paren != std::string::npos && paren + 2 < line.size() &&
          line[paren + 2] != 'Z' && line[paren + 2] != 'X') {
        return false;
      }
    }
    return true;
  }
  // The processes whose parent is `parent` (Linux's /proc).
  static std::vector<pid_t> Children(pid_t parent) {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      std::ifstream status(entry.path() / "status");
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("PPid:", 0) != 0) continue;
        if (std::stol(line.substr(5)) == parent) {
          out.push_back(static_cast<pid_t>(std::stol(name)));
        }
        break;
      }
    }
    return out;
  }
  std::string Data() const { return dir_ + "/data"; }
  // A PostgreSQL program, as nobody when we are root, behind the prefix.
  std::string Pg(const std::string& program) const {
    return AsPostgres(std::string(kPostgresBin) + "/" + program);
  }
  // A command as PostgreSQL's user, behind the prefix.
  std::string AsPostgres(const std::string& command) const {
    std::string cmd = o_.prefix.empty() ? "" : o_.prefix + " ";
    if (::geteuid() == 0) cmd += "runuser -u nobody -- ";
    return cmd + command;
  }
  bool MakeDir() {
    if (!o_.dir.empty()) {
      if (::mkdir(o_.dir.c_str(), 0755) != 0) {
        error_ = "cannot make " + o_.dir;
        return false;
      }
      dir_ = o_.dir;
    } else {
      std::string tmpl = o_.parent + "/hachi-pg-XXXXXX";
      if (::mkdtemp(tmpl.data()) == nullptr) {
        error_ = "cannot make a directory in " + o_.parent;
        return false;
      }
      dir_ = tmpl;
    }
    ::chmod(dir_.c_str(), 0755);
    if (::geteuid() == 0 && !Sh("chown nobody:nogroup " + dir_)) {
      error_ = "cannot give " + dir_ + " to nobody";
      return false;
    }
    return true;
  }
  // Its own socket directory and port, TCP when asked (trust from anywhere: a test's
  // private network), WAL for a standby, and no waiting on fsyncs it cannot lose.
  bool Configure() {
    std::ostringstream conf;
    conf << "\nport = " << o_.port << "\nunix_socket_directories = '" << dir_ << "'"
         << "\nlisten_addresses = '" << o_.listen << "'"
         << "\nfsync = on\nwal_level = replica\nmax_wal_senders = 4"
         << "\nhot_standby = on\nmax_connections = 200"
         // After a crash PostgreSQL first fsyncs every file of the data directory, one
         // by one: 4-5 s on this shared disk, each Kill(). One syncfs() does the same.
         << "\nrecovery_init_sync_method = syncfs\n";
    const std::string hba =
        "host all all 0.0.0.0/0 trust\nhost replication all 0.0.0.0/0 "
        "trust\nlocal replication all trust\n";
    return Sh("printf '%s' " + Quote(conf.str()) + " >> " + Data() +
              "/postgresql.conf") &&
           Sh("printf '%s' " + Quote(hba) + " >> " + Data() + "/pg_hba.conf");
  }
  std::string Logs() const {
    std::ifstream a(dir_ + "/initdb.log"), b(dir_ + "/postgres.log");
    std::stringstream ss;
    ss << a.rdbuf() << b.rdbuf();
    return ss.str();
  }

  Options o_;
  std::string dir_;
  bool owned_ = true;  // stopped and removed by the destructor
  bool ok_ = false;
  std::string error_;
};

// The port of the fixture's server (pg_fixture_main.cc).
inline constexpr int kSharedPostgresPort = 5432;

// One server for the whole test binary: the fixture's when $HACHI_SHARED_POSTGRES names
// a directory where one runs, else one started at first use and stopped at exit; null
// (with the reason in *why) when it cannot be started.
inline ScratchPostgres* SharedPostgres(std::string* why) {
  static std::unique_ptr<ScratchPostgres> server =
      []() -> std::unique_ptr<ScratchPostgres> {
    if (!PostgresMissing().empty()) return nullptr;
    if (const char* dir = std::getenv("HACHI_SHARED_POSTGRES"); dir && *dir) {
      auto shared = ScratchPostgres::Attach(dir, kSharedPostgresPort);
      if (shared->ok()) return shared;
    }
    return std::make_unique<ScratchPostgres>();
  }();
  if (server == nullptr) {
    *why = PostgresMissing();
    return nullptr;
  }
  if (!server->ok()) {
    *why = server->error();
    return nullptr;
  }
  return server.get();
}

// A name for this test's database or schema on the shared server: unique among the
// processes sharing it (ctest's), a pid used again included.
inline std::string UniqueName(const std::string& prefix) {
  static int n = 0;
  static const unsigned salt = std::random_device{}() % 1000000;
  return prefix + std::to_string(::getpid()) + "_" + std::to_string(salt) + "_" +
         std::to_string(++n);
}

// The URI of a new, empty database on the shared server, for one test; "" with the
// reason in *why.
inline std::string FreshPostgresDatabase(std::string* why) {
  ScratchPostgres* pg = SharedPostgres(why);
  if (pg == nullptr) return "";
  const std::string name = UniqueName("t");
  if (!pg->CreateDatabase(name)) {
    *why = "createdb " + name + " failed";
    return "";
  }
  return pg->conninfo(name);
}

// The URI of a new, empty schema in the shared server's database, for one test: cheaper
// than a database (a CREATE SCHEMA, not a copy of a template), for suites of hundreds.
inline std::string FreshPostgresSchema(std::string* why) {
  ScratchPostgres* pg = SharedPostgres(why);
  if (pg == nullptr) return "";
  const std::string name = UniqueName("s");
  if (!pg->Psql("CREATE SCHEMA " + name)) {
    *why = "CREATE SCHEMA " + name + " failed";
    return "";
  }
  return pg->conninfo() + "?options=-csearch_path%3D" + name;
}

}  // namespace hachi::state::testing
