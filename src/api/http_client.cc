#include "api/http_client.h"

#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "api/epoch_floor.h"
#include "api/ha_headers.h"
#include "api/protocol_json.h"

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

std::vector<std::string> SplitList(std::string_view list) {
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

}  // namespace

struct HttpClient::Impl {
  std::vector<Target> targets;
  size_t current = 0;       // the one that last answered as leader
  bool discovered = false;  // `current` was asked for, not assumed (Discover)
  int timeout_ms = 30000;
  httplib::Headers headers;
  std::shared_ptr<EpochFloor> floor;
  int failover_wait_ms = 0;
  std::function<void(int)> sleep;
};

void HttpClient::Abort() {
  for (Target& t : impl_->targets) t.client->stop();
}

void HttpClient::SetHeader(const std::string& name, const std::string& value) {
  impl_->headers.emplace(name, value);
  for (Target& t : impl_->targets) t.client->set_default_headers(impl_->headers);
}

void HttpClient::SetEpochFloor(std::shared_ptr<EpochFloor> floor) {
  impl_->floor = std::move(floor);
}

void HttpClient::SetFailoverWait(int wait_ms, std::function<void(int ms)> sleep) {
  impl_->failover_wait_ms = std::max(0, wait_ms);
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
  const std::vector<std::string> list = SplitList(address);
  for (const std::string& a : list) {
    Result<ServerAddress> parsed = ParseServerAddress(a);
    if (!parsed.ok()) return parsed.status();
    Result<std::unique_ptr<httplib::Client>> client = MakeClient(a, *parsed, timeout_ms);
    if (!client.ok()) return client.status();
    // Several controllers: a dead one must not hold a command for the whole connect
    // timeout before the next is tried.
    if (list.size() > 1)
      (*client)->set_connection_timeout(std::chrono::milliseconds(1500));
    impl->targets.push_back(Target{a, std::move(*parsed), std::move(*client)});
  }
  impl->failover_wait_ms = list.size() > 1 ? DefaultFailoverWaitMs() : 0;
  impl->sleep = [](int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
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

Result<HttpResponse> HttpClient::Request(std::string_view method, const std::string& path,
                                         const std::string& body, int timeout_ms) {
  if (method != "GET" && method != "POST" && method != "DELETE") {
    return InvalidArgument("HTTP method " + std::string(method) + " is not supported");
  }
  Impl& m = *impl_;
  const int t = timeout_ms >= 0 ? timeout_ms : m.timeout_ms;
  const size_t n = m.targets.size();
  const bool idempotent = method == "GET";
  // Waiting for a leader is real time (core/clock.h: code that only waits).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(m.failover_wait_ms);
  int pause_ms = 100;
  std::vector<std::string> said(n);
  for (;;) {
    bool skip_round = false;
    if (n > 1 && !m.discovered) {
      const std::optional<size_t> leader = Discover(m.targets, m.headers);
      if (leader) {
        m.current = *leader;
        m.discovered = true;
      } else {
        // No leader answers now: wait for one rather than hang on a silent address,
        // and at the end try each anyway.
        const bool last =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(pause_ms) >=
            deadline;
        skip_round = !last;
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
        if (next == n) break;
      }
      const size_t i = next;
      tried[i] = true;
      next = (i + 1) % n;
      Target& target = m.targets[i];
      httplib::Client& c = *target.client;
      c.set_read_timeout(std::chrono::milliseconds(t));
      c.set_write_timeout(std::chrono::milliseconds(t));
      httplib::Result r = method == "GET"    ? c.Get(path)
                          : method == "POST" ? c.Post(path, body, "application/json")
                                             : c.Delete(path);
      if (!r) {
        said[i] = httplib::to_string(r.error());
        // Sent, then lost: a POST or DELETE may have been done; never send it twice.
        if (r.error() != httplib::Error::Connection && !idempotent) {
          return Unavailable("lost the Hachi server at " + target.address + " (" +
                             said[i] + ") after sending " + std::string(method) + " " +
                             path + "; whether it was done is unknown");
        }
        continue;
      }
      if (r->status == 503 && r->has_header(kStandbyHeader)) {
        const std::string leader = r->get_header_value(kLeaderHeader);
        said[i] = "a standby" + (leader.empty() ? std::string(", no leader yet")
                                                : ", the leader is at " + leader);
        // A single address: the standby's answer is the answer.
        if (n == 1) return HttpResponse{r->status, r->body};
        Result<ServerAddress> named = ParseServerAddress(leader);
        for (size_t j = 0; named.ok() && j < n; ++j) {
          if (!tried[j] && SameServer(m.targets[j].parsed, *named)) next = j;
        }
        continue;
      }
      if (m.floor) {
        const std::string e = r->get_header_value(kEpochHeader);
        const int64_t epoch = e.empty() ? -1 : std::strtoll(e.c_str(), nullptr, 10);
        const int64_t floor = m.floor->value();
        if ((epoch >= 0 && !m.floor->Admit(epoch)) || (epoch < 0 && floor > 0)) {
          said[i] = "a deposed leader (" +
                    (epoch < 0 ? std::string("no epoch") : "epoch " + e) + "; epoch " +
                    std::to_string(floor) + " already seen)";
          continue;
        }
      }
      m.current = i;
      return HttpResponse{r->status, r->body};
    }
    if (n == 1) {
      return Unavailable("cannot reach the Hachi server at " + address_ + " (" + said[0] +
                         "); start one with `hachi dev` or set --server / HACHI_SERVER");
    }
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(pause_ms) >=
        deadline) {
      std::string all;
      for (size_t i = 0; i < n; ++i) {
        all += (i ? "; " : "") + m.targets[i].address + ": " + said[i];
      }
      return Unavailable("no Hachi server answers as the leader (" + all + ")");
    }
    m.sleep(pause_ms);
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
