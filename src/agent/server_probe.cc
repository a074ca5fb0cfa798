#include "agent/server_probe.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "api/http_client.h"

namespace hachi::agent {

namespace {

// One non-blocking connect to `addr`, waited for up to `timeout_ms`.
ProbeResult Connect(int family, const sockaddr* addr, socklen_t len, int timeout_ms) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ProbeResult::kNoAnswer;
  ProbeResult result = ProbeResult::kNoAnswer;
  int err = ::connect(fd, addr, len) == 0 ? 0 : errno;
  if (err == EINPROGRESS || err == EAGAIN) {
    pollfd p{fd, POLLOUT, 0};
    int n;
    do {
      n = ::poll(&p, 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    socklen_t sz = sizeof err;
    if (n == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sz) != 0) err = errno;
    if (n != 1) err = ETIMEDOUT;
  }
  if (err == 0) result = ProbeResult::kAccepted;
  // ENOENT: a Unix socket's file is gone with its server.
  if (err == ECONNREFUSED || (family == AF_UNIX && err == ENOENT)) {
    result = ProbeResult::kRefused;
  }
  ::close(fd);
  return result;
}

}  // namespace

namespace {

ProbeResult ProbeOne(std::string_view server, int timeout_ms) {
  Result<api::ServerAddress> a = api::ParseServerAddress(server);
  if (!a.ok()) return ProbeResult::kNoAnswer;
  if (!a->unix_path.empty()) {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const std::string& path = a->unix_path;
    if (path.size() >= sizeof un.sun_path) return ProbeResult::kNoAnswer;
    std::memcpy(un.sun_path, path.data(), path.size());
    return Connect(AF_UNIX, reinterpret_cast<const sockaddr*>(&un), sizeof un,
                   timeout_ms);
  }
  std::string host = a->host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(a->port);
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) {
    return ProbeResult::kNoAnswer;
  }
  // Refused only when every address refuses: one that answers, or may, is a server.
  ProbeResult result = ProbeResult::kNoAnswer;
  bool all_refused = found != nullptr;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const ProbeResult r = Connect(ai->ai_family, ai->ai_addr, ai->ai_addrlen, timeout_ms);
    if (r == ProbeResult::kAccepted) result = r;
    all_refused &= r == ProbeResult::kRefused;
  }
  ::freeaddrinfo(found);
  if (all_refused) return ProbeResult::kRefused;
  return result;
}

}  // namespace

// Several controllers: refused only when every one refuses — any that runs could lead
// and count this node's silence.
ProbeResult ProbeServer(std::string_view server, int timeout_ms) {
  ProbeResult result = ProbeResult::kRefused;
  for (const std::string& one : api::SplitServerList(server)) {
    const ProbeResult r = ProbeOne(one, timeout_ms);
    if (r == ProbeResult::kAccepted) return r;
    if (r == ProbeResult::kNoAnswer) result = r;
  }
  return result;
}

}  // namespace hachi::agent
