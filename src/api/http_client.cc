#include "api/http_client.h"

#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <vector>

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

struct HttpClient::Impl {
  std::unique_ptr<httplib::Client> client;
  int timeout_ms = 30000;
  httplib::Headers headers;
};

void HttpClient::Abort() { impl_->client->stop(); }

void HttpClient::SetHeader(const std::string& name, const std::string& value) {
  impl_->headers.emplace(name, value);
  impl_->client->set_default_headers(impl_->headers);
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

Result<std::unique_ptr<HttpClient>> HttpClient::Create(std::string_view address,
                                                       int timeout_ms) {
  auto impl = std::make_unique<Impl>();
  impl->timeout_ms = timeout_ms;
  std::string a(address);
  Result<ServerAddress> parsed = ParseServerAddress(a);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->unix_path.empty()) {
    // (host, port), not httplib's one-string form, which compiles a std::regex to split
    // a URL: half of a `hachi submit`'s instructions. A path never matched it anyway;
    // the port is not used over AF_UNIX.
    impl->client = std::make_unique<httplib::Client>(parsed->unix_path, 80);
    impl->client->set_address_family(AF_UNIX);
  } else {
    const std::string& hostport = parsed->hostport;
    if (parsed->https) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
      impl->client = std::make_unique<httplib::Client>("https://" + hostport);
      // The server's certificate is checked against the system's CAs, or the one file
      // $HACHI_CA_CERT names (a self-signed server's own certificate; `hachi --cacert`).
      impl->client->enable_server_certificate_verification(true);
      if (const char* ca = std::getenv("HACHI_CA_CERT"); ca != nullptr && *ca != '\0') {
        struct stat st {};
        if (::stat(ca, &st) != 0) {
          return InvalidArgument("HACHI_CA_CERT: cannot read " + std::string(ca));
        }
        impl->client->set_ca_cert_path(ca);
      }
#else
      return InvalidArgument("server address '" + a +
                             "': this hachi was built without TLS (no static libssl)");
#endif
    } else {
      impl->client = std::make_unique<httplib::Client>(parsed->host, parsed->port);
    }
  }
  impl->client->set_keep_alive(true);
  impl->client->set_tcp_nodelay(true);  // small requests: no Nagle delay
  impl->client->set_connection_timeout(
      std::chrono::milliseconds(std::min(timeout_ms, 5000)));
  return std::unique_ptr<HttpClient>(new HttpClient(a, std::move(impl)));
}

Result<HttpResponse> HttpClient::Request(std::string_view method, const std::string& path,
                                         const std::string& body, int timeout_ms) {
  httplib::Client& c = *impl_->client;
  const int t = timeout_ms >= 0 ? timeout_ms : impl_->timeout_ms;
  c.set_read_timeout(std::chrono::milliseconds(t));
  c.set_write_timeout(std::chrono::milliseconds(t));
  if (method != "GET" && method != "POST" && method != "DELETE") {
    return InvalidArgument("HTTP method " + std::string(method) + " is not supported");
  }
  httplib::Result r = method == "GET"    ? c.Get(path)
                      : method == "POST" ? c.Post(path, body, "application/json")
                                         : c.Delete(path);
  if (!r) {
    return Unavailable("cannot reach the Hachi server at " + address_ + " (" +
                       httplib::to_string(r.error()) +
                       "); start one with `hachi dev` or set --server / HACHI_SERVER");
  }
  return HttpResponse{r->status, r->body};
}

Result<std::string> HttpClient::Call(std::string_view method, const std::string& path,
                                     const std::string& body, int timeout_ms) {
  Result<HttpResponse> r = Request(method, path, body, timeout_ms);
  if (!r.ok()) return r.status();
  if (r->status >= 200 && r->status < 300) return std::move(r->body);
  return StatusFromError(r->status, r->body);
}

}  // namespace hachi::api
