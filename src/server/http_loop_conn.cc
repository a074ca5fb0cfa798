// HttpLoop's connections (server/http_loop_conn.h): accepting within the bounds,
// reading, writing (plain or TLS) and closing. The epoll thread's alone.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#include <cerrno>
#include <cstdlib>

#include "server/http_loop_conn.h"

namespace hachi::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 << 10;

}  // namespace

void HttpLoop::Accept(Listener& l) {
  for (int i = 0; i < 256; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(l.fd, reinterpret_cast<sockaddr*>(&addr), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: take the connection with the spare one and close it, so
        // the backlog does not fill with clients that wait for nothing.
        MutexLock lock(&mu_);
        ++stats_.refused_full;
        if (reserve_ >= 0) {
          ::close(reserve_);
          const int spare = ::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC);
          if (spare >= 0) ::close(spare);
          reserve_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        }
      }
      return;  // EAGAIN, or an error the next round retries
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->id = next_id_++;
    c->unix_socket = l.unix_socket;
    if (l.unix_socket) {
      ucred cred{};
      socklen_t clen = sizeof cred;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
        c->peer_cred = std::to_string(cred.uid) + " " + std::to_string(cred.gid) + " " +
                       std::to_string(cred.pid);
        c->peer_key = "uid:" + std::to_string(cred.uid);
        c->bounded = cred.uid != 0 && cred.uid != self_uid_;
      } else {
        c->peer_key = "uid:?";
      }
    } else {
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      char host[NI_MAXHOST] = "";
      char serv[NI_MAXSERV] = "";
      if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv,
                        sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        c->remote_addr = host;
        c->remote_port = std::atoi(serv);
      }
      c->peer_key = "ip:" + c->remote_addr;
    }
    const int bound = l.unix_socket ? options_.max_per_uid : options_.max_per_address;
    const int from_peer = c->bounded ? per_peer_[c->peer_key] : 0;
    const char* refusal = nullptr;
    if (static_cast<int>(conns_.size() - graveyard_.size()) >= max_connections_) {
      refusal = "the server is at its connection limit; try again later";
    } else if (c->bounded && from_peer >= bound) {
      refusal = l.unix_socket ? "too many connections from this user"
                              : "too many connections from this address";
    }
    if (refusal != nullptr) {
      {
        MutexLock lock(&mu_);
        ++(from_peer >= bound ? stats_.refused_per_peer : stats_.refused_full);
      }
      const std::string reply = ErrorReply(503, refusal);
      if (!l.tls) (void)!::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(fd);
      continue;
    }
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (l.tls) {
      c->ssl = SSL_new(static_cast<SSL_CTX*>(tls_ctx_));
      SSL_set_fd(c->ssl, fd);
      SSL_set_accept_state(c->ssl);
    }
#endif
    if (c->bounded) ++per_peer_[c->peer_key];
    c->deadline = steady_clock::now() + milliseconds(options_.header_timeout_ms);
    c->started_request = true;  // the first request's clock runs from the connect
    Conn& ref = *c;
    conns_.emplace(c->id, std::move(c));
    {
      MutexLock lock(&mu_);
      ++stats_.accepted;
      stats_.connections = static_cast<int64_t>(conns_.size() - graveyard_.size());
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = ref.id;
    ref.armed = ev.events;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
    ReadSome(ref);  // the request is often there already
  }
}

void HttpLoop::Rearm(Conn& c) {
  uint32_t want = EPOLLRDHUP;
  if (c.out_off < c.out.size()) want |= EPOLLOUT;
  if (c.phase == Conn::Phase::kHead || c.phase == Conn::Phase::kBody) want |= EPOLLIN;
  if (want == c.armed) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  c.armed = want;
  ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
}

void HttpLoop::OnEvent(Conn& c, uint32_t events) {
  const uint64_t id = c.id;
  if (events & (EPOLLERR | EPOLLHUP)) return Close(id);
  if (events & EPOLLOUT) {
    Flush(c);
    if (c.dead) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP)) {
    if (c.phase == Conn::Phase::kBusy && !(events & EPOLLIN)) {
      // The client hung up while its request waits or runs: nothing to answer.
      return Close(id);
    }
    ReadSome(c);
  }
}

void HttpLoop::ReadSome(Conn& c) {
  const uint64_t id = c.id;
  char buf[kReadChunk];
  for (int round = 0; round < 16; ++round) {
    if (c.phase == Conn::Phase::kBusy || c.phase == Conn::Phase::kClosing) {
      // Not reading the next request before this one is answered; but a hang-up is
      // seen (EPOLLRDHUP), and TLS may have records to take in.
      char probe;
      ssize_t n;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
      if (c.ssl != nullptr) break;
#endif
      n = ::recv(c.fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0) return Close(id);
      break;
    }
    ssize_t n;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (c.ssl != nullptr) {
      n = SSL_read(c.ssl, buf, sizeof buf);
      if (n <= 0) {
        const int err = SSL_get_error(c.ssl, static_cast<int>(n));
        ERR_clear_error();
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) break;
        return Close(id);
      }
    } else
#endif
    {
      n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        return Close(id);
      }
      if (n == 0) return Close(id);
    }
    if (!c.started_request) {
      c.started_request = true;
      c.deadline = steady_clock::now() + milliseconds(options_.header_timeout_ms);
    }
    c.in.append(buf, static_cast<size_t>(n));
    Parse(c);
    if (c.dead) return;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (c.ssl != nullptr) continue;  // until WANT_READ: decrypted bytes wake no epoll
#endif
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  if (!c.dead) Rearm(c);
}

void HttpLoop::Queue(Conn& c, std::string bytes, bool close) {
  if (c.out_off == c.out.size()) {
    c.out = std::move(bytes);
    c.out_off = 0;
  } else {
    c.out += bytes;
  }
  if (close) c.close_after = true;
  c.deadline = steady_clock::now() + milliseconds(options_.write_timeout_ms);
  Flush(c);
}

void HttpLoop::Flush(Conn& c) {
  const uint64_t id = c.id;
  while (c.out_off < c.out.size()) {
    const size_t left = c.out.size() - c.out_off;
    ssize_t n;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (c.ssl != nullptr) {
      n = SSL_write(c.ssl, c.out.data() + c.out_off,
                    static_cast<int>(std::min<size_t>(left, 1 << 30)));
      if (n <= 0) {
        const int err = SSL_get_error(c.ssl, static_cast<int>(n));
        ERR_clear_error();
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) break;
        return Close(id);
      }
    } else
#endif
    {
      n = ::send(c.fd, c.out.data() + c.out_off, left, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        return Close(id);
      }
    }
    c.out_off += static_cast<size_t>(n);
  }
  if (c.out_off < c.out.size()) return Rearm(c);
  c.out.clear();
  c.out_off = 0;
  if (c.close_after) {
    if (c.phase == Conn::Phase::kBusy) return;  // a 100 Continue; the reply comes later
    ::shutdown(c.fd, SHUT_WR);
    return Close(id);
  }
  if (c.phase == Conn::Phase::kHead) {
    c.deadline =
        steady_clock::now() + milliseconds(c.started_request ? options_.header_timeout_ms
                                                             : options_.idle_timeout_ms);
    Rearm(c);
  }
}

void HttpLoop::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end() || it->second->dead) return;
  Conn& c = *it->second;
  c.dead = true;
  graveyard_.push_back(id);
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (c.ssl != nullptr) {
    SSL_free(c.ssl);
    c.ssl = nullptr;
  }
#endif
  ::close(c.fd);
  if (c.bounded) {
    auto p = per_peer_.find(c.peer_key);
    if (p != per_peer_.end() && --p->second <= 0) per_peer_.erase(p);
  }
  MutexLock lock(&mu_);
  stats_.connections = static_cast<int64_t>(conns_.size() - graveyard_.size());
  auto parked = parked_.find(id);
  if (parked != parked_.end()) {
    auto t = by_topic_.find(parked->second.topic);
    if (t != by_topic_.end()) {
      t->second.erase(id);
      if (t->second.empty()) by_topic_.erase(t);
    }
    parked_.erase(parked);
  }
}

}  // namespace hachi::server
