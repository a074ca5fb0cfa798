// Raw-socket clients for the connection layer's tests (server/http_loop.h): connect,
// send, read whole replies by Content-Length, all bounded in time. Tests only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hachi::server::rawhttp {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A TCP connection to 127.0.0.1:`port`, from `source` (another loopback address) when
// given; -1 when refused.
inline int ConnectTcp(int port, const char* source = nullptr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (source != nullptr) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline int ConnectUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads until `count` replies are complete (by Content-Length), the peer closes, or
// `timeout_ms` passes. Returns what was read.
inline std::string ReadReplies(int fd, int count, int timeout_ms = 5000) {
  std::string in;
  const auto end = steady_clock::now() + milliseconds(timeout_ms);
  auto complete = [&] {
    int done = 0;
    size_t pos = 0;
    while (done < count) {
      const size_t h = in.find("\r\n\r\n", pos);
      if (h == std::string::npos) return false;
      const size_t cl = in.find("Content-Length: ", pos);
      size_t len = 0;
      if (cl != std::string::npos && cl < h) len = std::stoul(in.substr(cl + 16, 20));
      if (in.size() < h + 4 + len) return false;
      pos = h + 4 + len;
      ++done;
    }
    return true;
  };
  while (!complete() && steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  return in;
}

inline int StatusOf(const std::string& reply) {
  if (reply.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(reply.c_str() + 9);
}

// True when the server closed the connection within `timeout_ms`.
inline bool ClosedWithin(int fd, int timeout_ms) {
  const auto end = steady_clock::now() + milliseconds(timeout_ms);
  while (steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

}  // namespace hachi::server::rawhttp
