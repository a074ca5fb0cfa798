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

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

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
      c->peer = c->bounded ? Admission::Peer::kUser : Admission::Peer::kPrivileged;
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
    const bool over_peer = c->bounded && from_peer >= bound;
    // TCP stops socket_reserve_ short of the total, so that the Unix socket always has
    // room; either side makes room by closing anonymous connections that wait for
    // nothing.
    const bool full =
        static_cast<int>(conns_.size() - graveyard_.size()) >= max_connections_ ||
        (!l.unix_socket && tcp_conns_ >= max_connections_ - socket_reserve_);
    if (over_peer) {
      refusal = l.unix_socket ? "too many connections from this user"
                              : "too many connections from this address";
    } else if (full && !EvictAnonymous()) {
      refusal = "the server is at its connection limit; try again later";
    }
    if (refusal != nullptr) {
      {
        MutexLock lock(&mu_);
        ++(over_peer ? stats_.refused_per_peer : stats_.refused_full);
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
    if (!l.unix_socket) ++tcp_conns_;
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

// Room for a new connection: the anonymous TCP connections that wait for nothing (no
// request being handled, no reply to send), idle ones first, then those whose head is
// still coming, each the longest waiting first; a batch at a time, so that a flood does
// not cost a scan per connection.
bool HttpLoop::EvictAnonymous() {
  std::vector<std::pair<std::pair<bool, SteadyTime>, uint64_t>> idle;
  for (const auto& [id, c] : conns_) {
    if (c->dead || c->unix_socket || c->peer != Admission::Peer::kAnonymous) continue;
    if (c->phase != Conn::Phase::kHead || Backlog(*c) > 0) continue;
    idle.push_back({{c->started_request, c->deadline}, id});
  }
  if (idle.empty()) return false;
  const size_t n = std::max<size_t>(1, idle.size() / 32);
  std::partial_sort(idle.begin(), idle.begin() + static_cast<std::ptrdiff_t>(n),
                    idle.end());
  for (size_t i = 0; i < n; ++i) Close(idle[i].second);
  MutexLock lock(&mu_);
  stats_.evicted_idle += static_cast<int64_t>(n);
  return true;
}

// A request on an anonymous TCP connection said who sent it: from now on the
// connection counts as that user's (max_per_user; agents and admins unbounded), not as
// its address's. Never back: a later anonymous request on it changes nothing.
void HttpLoop::Identify(Conn& c, const Admission& a) {
  if (c.unix_socket || c.peer != Admission::Peer::kAnonymous || !a.status.ok() ||
      a.peer == Admission::Peer::kAnonymous) {
    return;
  }
  if (c.bounded) {
    auto p = per_peer_.find(c.peer_key);
    if (p != per_peer_.end() && --p->second <= 0) per_peer_.erase(p);
  }
  c.peer = a.peer;
  if (a.peer == Admission::Peer::kPrivileged) {
    c.bounded = false;
    c.peer_key.clear();
    return;
  }
  c.peer_key = "user:" + a.user;
  c.bounded = true;
  if (++per_peer_[c.peer_key] > options_.max_per_user) {
    c.over_bound = true;
    MutexLock lock(&mu_);
    ++stats_.over_user_bound;
  }
}

// Bodies of agents and admins are not counted; a user's (all anonymous callers being
// one) are, against their own bound and everyone's.
bool HttpLoop::ReserveBody(Conn& c, int64_t bytes) {
  if (c.peer == Admission::Peer::kPrivileged || bytes <= 0) return true;
  const std::string key = c.peer == Admission::Peer::kAnonymous ? "" : c.peer_key;
  int64_t& mine = body_bytes_by_user_[key];
  const char* over = nullptr;
  if (mine + bytes > options_.max_body_bytes_per_user) {
    over = "this user's requests being read or handled hold more than ";
  } else if (body_bytes_ + bytes > options_.max_body_bytes_in_flight) {
    over = "requests being read or handled hold more than ";
  }
  if (over != nullptr) {
    const int64_t bound = mine + bytes > options_.max_body_bytes_per_user
                              ? options_.max_body_bytes_per_user
                              : options_.max_body_bytes_in_flight;
    if (mine == 0) body_bytes_by_user_.erase(key);
    {
      MutexLock lock(&mu_);
      ++stats_.refused_bodies;
    }
    Fail(c, 503,
         std::string(over) + std::to_string(bound >> 20) +
             " MiB of bodies; try again shortly");
    return false;
  }
  mine += bytes;
  body_bytes_ += bytes;
  c.body_bytes += bytes;
  return true;
}

void HttpLoop::ReleaseBody(Conn& c) {
  if (c.body_bytes == 0) return;
  const std::string key = c.peer == Admission::Peer::kAnonymous ? "" : c.peer_key;
  auto it = body_bytes_by_user_.find(key);
  if (it != body_bytes_by_user_.end() && (it->second -= c.body_bytes) <= 0) {
    body_bytes_by_user_.erase(it);
  }
  body_bytes_ -= c.body_bytes;
  c.body_bytes = 0;
}

size_t HttpLoop::Backlog(const Conn& c) const { return c.out.size() - c.out_off; }

void HttpLoop::Rearm(Conn& c) {
  uint32_t want = EPOLLRDHUP;
  if (c.out_off < c.out.size()) want |= EPOLLOUT;
  if ((c.phase == Conn::Phase::kHead && Backlog(c) <= options_.max_reply_backlog) ||
      c.phase == Conn::Phase::kBody) {
    want |= EPOLLIN;
  }
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
    // The client took its replies: the requests it pipelined meanwhile are read now.
    if (c.phase == Conn::Phase::kHead && !c.in.empty() &&
        Backlog(c) <= options_.max_reply_backlog) {
      Parse(c);
      if (c.dead) return;
      Rearm(c);
    }
  }
  if (events & (EPOLLIN | EPOLLRDHUP)) {
    const bool waiting = c.phase == Conn::Phase::kBusy || c.phase == Conn::Phase::kAdmit;
    if (waiting && !(events & EPOLLIN)) {
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
    if (c.phase == Conn::Phase::kBusy || c.phase == Conn::Phase::kClosing ||
        c.phase == Conn::Phase::kAdmit ||
        (c.phase == Conn::Phase::kHead && Backlog(c) > options_.max_reply_backlog)) {
      // Not reading the next request before this one is answered (or its replies
      // taken); but a hang-up is seen (EPOLLRDHUP), and TLS may have records to take in.
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
  ReleaseBody(c);
  if (!c.unix_socket) --tcp_conns_;
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
