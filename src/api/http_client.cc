#include "api/http_client.h"

#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "api/epoch_floor.h"
#include "api/ha_headers.h"
#include "api/protocol_json.h"
#include "core/mutex.h"

namespace hachi::api {

std::string ResolveServer(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("HACHI_SERVER");
  if (env != nullptr && *env != '\0') return env;
  // A server on this machine: its Unix socket, where the kernel tells it who we are.
  std::vector<std::string> sockets = {"/run/hachi/hachi.sock",
                                      "/var/lib/hachi/hachi.sock"};
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    sockets.push_back(std::string(home) + "/.hachi/dev/hachi.sock");
  }
  for (const std::string& path : sockets) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return "unix:" + path;
  }
  return kDefaultServer;
}

std::vector<std::string> SplitServerList(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    std::string_view item = list.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.emplace_back(item);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

namespace {

// One address of the list, with its own connection.
struct Target {
  std::string address;
  ServerAddress parsed;
  std::unique_ptr<httplib::Client> client;
};

Result<std::unique_ptr<httplib::Client>> MakeClient(const std::string& a,
                                                    const ServerAddress& parsed,
                                                    int timeout_ms);

// Two forms of one server: "http://a:1" and "a:1/" alike.
bool SameServer(const ServerAddress& a, const ServerAddress& b) {
  if (!a.unix_path.empty() || !b.unix_path.empty()) return a.unix_path == b.unix_path;
  return a.https == b.https && a.host == b.host && a.port == b.port;
}

int DefaultFailoverWaitMs() {
  const char* env = std::getenv("HACHI_FAILOVER_WAIT_MS");
  if (env == nullptr || *env == '\0') return 20000;
  return std::max(0, std::atoi(env));
}

// What one try at one address came to.
struct Attempt {
  enum Kind {
    kAnswered,  // the leader's reply (or any server's, alone in the list)
    kMovedOn,   // nothing from a leader there: the next address may have it
    kFailed,    // the request must not be tried again elsewhere
  } kind = kMovedOn;
  HttpResponse response;
  Status error;        // kFailed
  std::string said;    // kMovedOn: what the address said, for the final error
  std::string leader;  // a standby's X-Hachi-Leader ("": none)
  bool standby = false;
  bool deposed = false;  // refused by the epoch floor
};

// Errors of a request that never left this host: trying it elsewhere cannot do it twice.
bool NothingSent(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::BindIPAddress:
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return true;
    default:
      return false;
  }
}

// The reply's X-Hachi-Epoch: -1 when absent or not a number.
int64_t EpochOf(const httplib::Response& r) {
  const std::string e = r.get_header_value(kEpochHeader);
  if (e.empty()) return -1;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(e.c_str(), &end, 10);
  return errno != 0 || *end != '\0' || v < 0 ? -1 : v;
}

}  // namespace

struct HttpClient::Impl {
  std::vector<Target> targets;
  size_t current = 0;       // the one that last answered as leader
  bool discovered = false;  // `current` was asked for, not assumed (Discover)
  int timeout_ms = 30000;
  httplib::Headers headers;
  std::shared_ptr<EpochFloor> floor;
  int failover_wait_ms = 0;
  const Clock* clock = RealClock();
  std::function<void(int)> sleep;  // null: Pause
  std::atomic<bool> aborted{false};
  Mutex abort_mu;  // only for abort_cv: a pause ends when Abort is called
  CondVar abort_cv{&abort_mu};

  // The real pause between rounds: `ms`, or until Abort.
  void Pause(int ms) EXCLUDES(abort_mu);

  Attempt Try(Target& target, std::string_view method, const std::string& path,
              const std::string& body, int wait_ms);
  // The floor's verdict on a reply: "" when admitted, else why it was refused.
  std::string Refusal(const Target& target, const httplib::Response& r);
};

void HttpClient::Impl::Pause(int ms) {
  const auto until = CondVar::Clock::now() + std::chrono::milliseconds(ms);
  MutexLock lock(&abort_mu);
  while (!aborted && abort_cv.WaitUntil(until)) {
  }
}

void HttpClient::Abort() {
  {
    MutexLock lock(&impl_->abort_mu);
    impl_->aborted = true;
  }
  impl_->abort_cv.SignalAll();
  for (Target& t : impl_->targets) t.client->stop();
}

void HttpClient::SetHeader(const std::string& name, const std::string& value) {
  impl_->headers.emplace(name, value);
  for (Target& t : impl_->targets) t.client->set_default_headers(impl_->headers);
}

void HttpClient::SetEpochFloor(std::shared_ptr<EpochFloor> floor) {
  impl_->floor = std::move(floor);
}

void HttpClient::SetFailoverWait(int wait_ms, const Clock* clock,
                                 std::function<void(int ms)> sleep) {
  impl_->failover_wait_ms = std::max(0, wait_ms);
  if (clock != nullptr) impl_->clock = clock;
  if (sleep) impl_->sleep = std::move(sleep);
}

HttpClient::HttpClient(std::string address, std::unique_ptr<Impl> impl)
    : address_(std::move(address)), impl_(std::move(impl)) {}

HttpClient::~HttpClient() = default;

Result<ServerAddress> ParseServerAddress(std::string_view address) {
  const std::string a(address);
  ServerAddress out;
  if (a.rfind("unix:", 0) == 0) {
    out.unix_path = a.substr(5);
    if (out.unix_path.empty())
      return InvalidArgument("server address '" + a + "': no socket path");
    return out;
  }
  out.https = a.rfind("https://", 0) == 0;
  std::string hostport = out.https                    ? a.substr(8)
                         : a.rfind("http://", 0) == 0 ? a.substr(7)
                                                      : a;
  while (!hostport.empty() && hostport.back() == '/') hostport.pop_back();
  const size_t colon = hostport.rfind(':');
  if (hostport.empty() || colon == std::string::npos || colon == 0 ||
      colon + 1 == hostport.size()) {
    return InvalidArgument("server address '" + a +
                           "': expected http://HOST:PORT, https://HOST:PORT or "
                           "unix:/path/to.sock");
  }
  char* end = nullptr;
  const long port = std::strtol(hostport.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) {
    return InvalidArgument("server address '" + a + "': bad port");
  }
  out.host = hostport.substr(0, colon);
  out.port = static_cast<int>(port);
  out.hostport = std::move(hostport);
  return out;
}

namespace {

Result<std::unique_ptr<httplib::Client>> MakeClient(const std::string& a,
                                                    const ServerAddress& parsed,
                                                    int timeout_ms) {
  (void)a;  // named in the error of a build without TLS
  std::unique_ptr<httplib::Client> client;
  if (!parsed.unix_path.empty()) {
    // (host, port), not httplib's one-string form, which compiles a std::regex to split
    // a URL: half of a `hachi submit`'s instructions. A path never matched it anyway;
    // the port is not used over AF_UNIX.
    client = std::make_unique<httplib::Client>(parsed.unix_path, 80);
    client->set_address_family(AF_UNIX);
  } else if (parsed.https) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    client = std::make_unique<httplib::Client>("https://" + parsed.hostport);
    // The server's certificate is checked against the system's CAs, or the one file
    // $HACHI_CA_CERT names (a self-signed server's own certificate; `hachi --cacert`).
    client->enable_server_certificate_verification(true);
    if (const char* ca = std::getenv("HACHI_CA_CERT"); ca != nullptr && *ca != '\0') {
      struct stat st {};
      if (::stat(ca, &st) != 0) {
        return InvalidArgument("HACHI_CA_CERT: cannot read " + std::string(ca));
      }
      client->set_ca_cert_path(ca);
    }
#else
    return InvalidArgument("server address '" + a +
                           "': this hachi was built without TLS (no static libssl)");
#endif
  } else {
    client = std::make_unique<httplib::Client>(parsed.host, parsed.port);
  }
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);  // small requests: no Nagle delay
  client->set_connection_timeout(std::chrono::milliseconds(std::min(timeout_ms, 5000)));
  return client;
}

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::Create(std::string_view address,
                                                       int timeout_ms) {
  auto impl = std::make_unique<Impl>();
  impl->timeout_ms = timeout_ms;
  const std::vector<std::string> list = SplitServerList(address);
  for (const std::string& a : list) {
    Result<ServerAddress> parsed = ParseServerAddress(a);
    if (!parsed.ok()) return parsed.status();
    Result<std::unique_ptr<httplib::Client>> client = MakeClient(a, *parsed, timeout_ms);
    if (!client.ok()) return client.status();
    // Several controllers: a dead one must not hold a command for the whole connect
    // timeout before the next is tried.
    if (list.size() > 1)
      (*client)->set_connection_timeout(
          std::chrono::milliseconds(std::min(timeout_ms, 1500)));
    impl->targets.push_back(Target{a, std::move(*parsed), std::move(*client)});
  }
  impl->failover_wait_ms = list.size() > 1 ? DefaultFailoverWaitMs() : 0;
  return std::unique_ptr<HttpClient>(
      new HttpClient(std::string(address), std::move(impl)));
}

namespace {

// Which of several controllers leads, asked of all at once (GET /api/v1/health, 1.5 s
// each): a leader frozen or cut off must not hold a command for its whole timeout when
// another has taken over. The index of the one that answers as leader, else of the one
// a standby names if that one answered at all (a standby's view lags a takeover by up to
// a lease), else none: no leader now.
std::optional<size_t> Discover(const std::vector<Target>& targets,
                               const httplib::Headers& headers) {
  const size_t n = targets.size();
  std::vector<int> status(n, 0);
  std::vector<int64_t> epoch(n, -1);
  std::vector<std::string> named(n);
  std::vector<std::thread> askers;
  for (size_t i = 0; i < n; ++i) {
    askers.emplace_back([&, i] {
      Result<std::unique_ptr<httplib::Client>> c =
          MakeClient(targets[i].address, targets[i].parsed, 1500);
      if (!c.ok()) return;
      (*c)->set_connection_timeout(std::chrono::milliseconds(1500));
      (*c)->set_read_timeout(std::chrono::milliseconds(1500));
      (*c)->set_default_headers(headers);
      httplib::Result r = (*c)->Get(std::string(kApiPrefix) + "/health");
      if (!r) return;
      status[i] = r->status;
      named[i] = r->get_header_value(kLeaderHeader);
      const std::string e = r->get_header_value(kEpochHeader);
      if (!e.empty()) epoch[i] = std::strtoll(e.c_str(), nullptr, 10);
    });
  }
  for (std::thread& t : askers) t.join();
  // Two that answer as leader: one is deposed and does not know it yet; the higher
  // epoch is the leader.
  std::optional<size_t> best;
  for (size_t i = 0; i < n; ++i) {
    if (status[i] == 200 && (!best || epoch[i] > epoch[*best])) best = i;
  }
  if (best) return best;
  for (size_t i = 0; i < n; ++i) {
    Result<ServerAddress> leader = ParseServerAddress(named[i]);
    for (size_t j = 0; leader.ok() && j < n; ++j) {
      if (status[j] != 0 && SameServer(targets[j].parsed, *leader)) return j;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string HttpClient::Impl::Refusal(const Target& target, const httplib::Response& r) {
  if (!floor) return "";
  const int64_t epoch = EpochOf(r);
  if (epoch >= 0) {
    if (floor->Admit(epoch, target.address)) return "";
    return "epoch " + std::to_string(epoch) + ", epoch " +
           std::to_string(floor->value()) + " already seen";
  }
  // A server without a lease in a cluster whose leaders have one: misconfigured, or a
  // stale single server. Its errors say nothing to act on; its successes are refused.
  const int64_t seen = floor->value();
  if (seen == 0 || r.status < 200 || r.status >= 300) return "";
  return "no epoch, epoch " + std::to_string(seen) + " already seen";
}

Attempt HttpClient::Impl::Try(Target& target, std::string_view method,
                              const std::string& path, const std::string& body,
                              int wait_ms) {
  Attempt a;
  if (aborted) {
    a.kind = Attempt::kFailed;
    a.said = "interrupted";
    a.error = Unavailable("the request to the Hachi server at " + target.address +
                          " was interrupted");
    return a;
  }
  httplib::Client& c = *target.client;
  c.set_read_timeout(std::chrono::milliseconds(wait_ms));
  c.set_write_timeout(std::chrono::milliseconds(wait_ms));
  httplib::Result r = method == "GET"    ? c.Get(path)
                      : method == "HEAD" ? c.Head(path)
                      : method == "POST" ? c.Post(path, body, "application/json")
                                         : c.Delete(path);
  if (!r) {
    a.said = httplib::to_string(r.error());
    if (aborted) {
      a.kind = Attempt::kFailed;
      a.error = Unavailable("the request to the Hachi server at " + target.address +
                            " was interrupted");
    } else if (!NothingSent(r.error()) && method != "GET" && method != "HEAD") {
      // Sent, then lost: a POST or DELETE may have been done; never send it twice.
      a.kind = Attempt::kFailed;
      a.error = Unavailable("lost the Hachi server at " + target.address + " (" + a.said +
                            ") after sending " + std::string(method) + " " + path +
                            "; whether it was done is unknown");
    }
    return a;
  }
  a.response = HttpResponse{r->status, r->body};
  if (r->status == 503 && r->has_header(kStandbyHeader)) {
    a.standby = true;
    a.leader = r->get_header_value(kLeaderHeader);
    a.said = "a standby" + (a.leader.empty() ? std::string(", no leader yet")
                                             : ", the leader is at " + a.leader);
    return a;
  }
  if (std::string why = Refusal(target, *r); !why.empty()) {
    a.deposed = true;
    a.said = "a reply from a deposed leader: " + why;
    return a;
  }
  a.kind = Attempt::kAnswered;
  return a;
}

Result<HttpResponse> HttpClient::Request(std::string_view method, const std::string& path,
                                         const std::string& body, int timeout_ms) {
  if (method != "GET" && method != "HEAD" && method != "POST" && method != "DELETE") {
    return InvalidArgument("HTTP method " + std::string(method) + " is not supported");
  }
  Impl& m = *impl_;
  const int t = timeout_ms >= 0 ? timeout_ms : m.timeout_ms;
  const size_t n = m.targets.size();
  if (n == 1) {  // one server: its answer, whatever it is, as before there were lists
    Attempt a = m.Try(m.targets[0], method, path, body, t);
    if (a.kind == Attempt::kAnswered || a.standby) return std::move(a.response);
    if (a.deposed) {
      return Unavailable("a reply from a deposed leader at " + address_ +
                         a.said.substr(a.said.find(':')));
    }
    return Unavailable("cannot reach the Hachi server at " + address_ + " (" + a.said +
                       "); start one with `hachi dev` or set --server / HACHI_SERVER");
  }
  const int64_t deadline = m.clock->MonotonicMs() + m.failover_wait_ms;
  int pause_ms = 100;
  std::vector<std::string> said(n);
  for (;;) {
    bool skip_round = false;
    if (!m.discovered) {
      const std::optional<size_t> leader = Discover(m.targets, m.headers);
      if (leader) {
        m.current = *leader;
        m.discovered = true;
      } else {
        // No leader answers now: wait for one rather than hang on a silent address,
        // and at the end try each anyway.
        skip_round = m.clock->MonotonicMs() < deadline && !m.aborted;
        for (size_t i = 0; i < n; ++i) said[i] = "no answer as the leader";
      }
    }
    // One round: from the last leader on, jumping to a leader a standby names.
    std::vector<bool> tried(n, false);
    size_t next = m.current;
    for (size_t k = 0; k < n && !skip_round; ++k) {
      if (tried[next]) {
        next = 0;
        while (next < n && tried[next]) ++next;
      }
      const size_t i = next;
      tried[i] = true;
      next = (i + 1) % n;
      Attempt a = m.Try(m.targets[i], method, path, body, t);
      if (a.kind == Attempt::kFailed) return a.error;
      if (a.kind == Attempt::kAnswered) {
        m.current = i;
        return std::move(a.response);
      }
      said[i] = std::move(a.said);
      // Only to an address of the list, compared parsed ("http://a:1" is "a:1/").
      Result<ServerAddress> named = ParseServerAddress(a.leader);
      for (size_t j = 0; !a.leader.empty() && named.ok() && j < n; ++j) {
        if (!tried[j] && SameServer(m.targets[j].parsed, *named)) next = j;
      }
    }
    const int64_t left = deadline - m.clock->MonotonicMs();
    if (left <= 0 || m.aborted) {
      std::string all;
      for (size_t i = 0; i < n; ++i) {
        all += (i ? "; " : "") + m.targets[i].address + ": " + said[i];
      }
      return Unavailable("no Hachi server answers as the leader (" + all + ")");
    }
    // The last pause ends at the deadline, for one more round then.
    const int pause = static_cast<int>(std::min<int64_t>(pause_ms, left));
    if (m.sleep) {
      m.sleep(pause);
    } else {
      m.Pause(pause);  // real time: it only waits (the deadline reads the clock)
    }
    pause_ms = std::min(pause_ms * 2, 1000);
    m.discovered = false;  // ask again who leads
  }
}

Result<std::string> HttpClient::Call(std::string_view method, const std::string& path,
                                     const std::string& body, int timeout_ms) {
  Result<HttpResponse> r = Request(method, path, body, timeout_ms);
  if (!r.ok()) return r.status();
  if (r->status >= 200 && r->status < 300) return std::move(r->body);
  return StatusFromError(r->status, r->body);
}

}  // namespace hachi::api
