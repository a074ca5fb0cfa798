#include "agent/server_probe.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

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

ProbeResult ProbeServer(std::string_view server, int timeout_ms) {
  std::string a(server);
  if (a.rfind("unix:", 0) == 0) {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const std::string path = a.substr(5);
    if (path.empty() || path.size() >= sizeof un.sun_path) return ProbeResult::kNoAnswer;
    std::memcpy(un.sun_path, path.data(), path.size());
    return Connect(AF_UNIX, reinterpret_cast<const sockaddr*>(&un), sizeof un,
                   timeout_ms);
  }
  for (const char* scheme : {"https://", "http://"}) {
    if (a.rfind(scheme, 0) == 0) a = a.substr(std::strlen(scheme));
  }
  while (!a.empty() && a.back() == '/') a.pop_back();
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0) return ProbeResult::kNoAnswer;
  std::string host = a.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), a.c_str() + colon + 1, &hints, &found) != 0) {
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

}  // namespace hachi::agent
