#include "server/http_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "api/protocol_json.h"

namespace hachi::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint64_t kListenerBit = uint64_t{1} << 63;
constexpr uint64_t kWakeTag = kListenerBit - 1;
constexpr size_t kRecentNotifications = 4096;
constexpr size_t kMaxHeaders = 100;
constexpr size_t kMaxRequestLine = 8192;
constexpr size_t kMaxChunkLine = 1024;
constexpr size_t kReadChunk = 64 << 10;

const char* Reason(int status) {
  static constexpr std::pair<int, const char*> kReasons[] = {
      {100, "Continue"},
      {200, "OK"},
      {201, "Created"},
      {204, "No Content"},
      {206, "Partial Content"},
      {304, "Not Modified"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {411, "Length Required"},
      {413, "Payload Too Large"},
      {414, "URI Too Long"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {503, "Service Unavailable"},
      {505, "HTTP Version Not Supported"}};
  for (const auto& [code, text] : kReasons) {
    if (code == status) return text;
  }
  return status < 400 ? "OK" : "Error";
}

std::string Serialize(const httplib::Response& res, bool close, bool head_only) {
  std::string out;
  out.reserve(res.body.size() + 256);
  out += "HTTP/1.1 " + std::to_string(res.status) + " " + Reason(res.status) + "\r\n";
  for (const auto& [name, value] : res.headers) {
    if (strcasecmp(name.c_str(), "Content-Length") == 0 ||
        strcasecmp(name.c_str(), "Connection") == 0) {
      continue;
    }
    out += name + ": " + value + "\r\n";
  }
  if (res.status != 304 && res.status != 204) {
    out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  }
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head_only && res.status != 304 && res.status != 204) out += res.body;
  return out;
}

std::string ErrorReply(int status, const std::string& message) {
  httplib::Response res;
  res.status = status;
  res.set_content(api::ErrorToJson(status == 503   ? Unavailable(message)
                                   : status >= 500 ? Internal(message)
                                                   : InvalidArgument(message)),
                  "application/json");
  return Serialize(res, /*close=*/true, false);
}

bool IsTokenChar(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) ||
         std::strchr("!#$%&'*+-.^_`|~", ch) != nullptr;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

// ---- HttpLoop ----

struct HttpLoop::Listener {
  int fd = -1;
  bool unix_socket = false;
  bool tls = false;
  std::string path;  // the Unix socket's
};

struct HttpLoop::Conn {
  enum class Phase { kHead, kBody, kBusy, kClosing };
  int fd = -1;
  uint64_t id = 0;
  bool unix_socket = false;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  SSL* ssl = nullptr;
#endif
  std::string peer_key;  // what max_per_address / max_per_uid count by
  bool bounded = true;   // counted against a per-peer bound
  std::string remote_addr;
  int remote_port = -1;
  std::string peer_cred;  // "UID GID PID" on the Unix socket

  Phase phase = Phase::kHead;
  SteadyTime deadline{};
  bool started_request = false;  // a byte of the next request arrived
  bool read_closed = false;      // the peer shut down its side
  std::string in;
  size_t in_off = 0;

  // The request being read.
  std::shared_ptr<httplib::Request> req;
  bool keep_alive = true;
  bool head_only = false;
  bool chunked = false;
  size_t content_length = 0;
  enum class Chunk { kSize, kData, kDataEnd, kTrailer } chunk = Chunk::kSize;
  size_t chunk_left = 0;

  std::string out;
  size_t out_off = 0;
  bool close_after = false;
  uint32_t armed = 0;  // the epoll events registered now
  bool dead = false;   // closed; freed at the end of the loop's round
};

HttpLoop::HttpLoop(const HttpRouter* router, HttpLoopOptions options)
    : router_(router), options_(std::move(options)) {}

HttpLoop::~HttpLoop() {
  Stop();
  for (auto& l : listeners_) {
    if (l->fd >= 0) ::close(l->fd);
    if (l->unix_socket) ::unlink(l->path.c_str());
  }
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (tls_ctx_ != nullptr) SSL_CTX_free(static_cast<SSL_CTX*>(tls_ctx_));
#endif
}

Status HttpLoop::UseTls(const std::string& cert_file, const std::string& key_file) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal("TLS: cannot make an SSL context");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx,
                   SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return InvalidArgument("TLS: cannot load the certificate " + cert_file +
                           " with the key " + key_file +
                           " (PEM files, readable, the key matching the certificate)");
  }
  if (tls_ctx_ != nullptr) SSL_CTX_free(static_cast<SSL_CTX*>(tls_ctx_));
  tls_ctx_ = ctx;
  return Status::Ok();
#else
  (void)cert_file;
  (void)key_file;
  return Unavailable("this hachi was built without TLS (no static libssl at build time)");
#endif
}

Result<int> HttpLoop::ListenTcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string name = host + ":" + std::to_string(port);
  if (const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                   std::to_string(port).c_str(), &hints, &res);
      rc != 0) {
    return Unavailable("cannot listen on " + name + ": " + ::gai_strerror(rc));
  }
  int fd = -1;
  int err = 0;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                  a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // SO_REUSEADDR, not SO_REUSEPORT: a second server must not share the port, and a
    // restart must not wait for the TIME_WAIT sockets of the last one.
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 4096) != 0) {
      err = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return Unavailable("cannot listen on " + name + ": " + std::strerror(err) +
                       (err == EADDRINUSE ? " (another Hachi server?)" : ""));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int got = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  auto l = std::make_unique<Listener>();
  l->fd = fd;
  l->tls = tls_ctx_ != nullptr;
  listeners_.push_back(std::move(l));
  return got;
}

Status HttpLoop::ListenUnix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    return InvalidArgument("the Unix socket path " + path + " is too long");
  }
  ::unlink(path.c_str());  // a stale socket from a killed server
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return Unavailable("cannot make a Unix socket: " + std::string(strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 4096) != 0) {
    const int err = errno;
    ::close(fd);
    return Unavailable("cannot listen on the Unix socket " + path + ": " +
                       std::strerror(err));
  }
  // Every local user may connect: who they are comes from the kernel (SO_PEERCRED),
  // and what they may do from that.
  ::chmod(path.c_str(), 0666);
  auto l = std::make_unique<Listener>();
  l->fd = fd;
  l->unix_socket = true;
  l->path = path;
  listeners_.push_back(std::move(l));
  return Status::Ok();
}

Status HttpLoop::Start() {
  // OpenSSL writes with write(2), which raises SIGPIPE on a connection the client closed
  // (our own sends say MSG_NOSIGNAL): ignored, as cpp-httplib's server did.
  ::signal(SIGPIPE, SIG_IGN);
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    const rlim_t was = lim.rlim_cur;
    if (lim.rlim_cur < lim.rlim_max) {
      lim.rlim_cur = lim.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) {
        std::fprintf(stderr, "hachi server: open files limit %llu (raised from %llu)\n",
                     static_cast<unsigned long long>(lim.rlim_cur),
                     static_cast<unsigned long long>(was));
      } else {
        lim.rlim_cur = was;
      }
    }
  }
  const int64_t limit =
      lim.rlim_cur == RLIM_INFINITY ? (1 << 20) : static_cast<int64_t>(lim.rlim_cur);
  max_connections_ = options_.max_connections > 0
                         ? options_.max_connections
                         : static_cast<int>(std::max<int64_t>(64, limit - 256));
  self_uid_ = ::geteuid();
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  reserve_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (epoll_ < 0 || wake_ < 0) return Internal("epoll: " + std::string(strerror(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeTag;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  for (size_t i = 0; i < listeners_.size(); ++i) {
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerBit | i;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, listeners_[i]->fd, &ev);
  }
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { Worker(); });
  }
  loop_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void HttpLoop::Stop() {
  if (stopping_.exchange(true)) return;
  {
    MutexLock lock(&mu_);
    std::vector<uint64_t> ids;
    for (const auto& [id, p] : parked_) ids.push_back(id);
    for (uint64_t id : ids) UnparkLocked(id, /*expired=*/true);
  }
  if (wake_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }
  if (loop_.joinable()) loop_.join();
  {
    MutexLock lock(&mu_);
    workers_stop_ = true;
    work_cv_.SignalAll();
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  for (auto& [id, c] : conns_) {
    if (c->dead) continue;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (c->ssl != nullptr) SSL_free(c->ssl);
#endif
    ::close(c->fd);
  }
  conns_.clear();
  for (auto& l : listeners_) {
    if (l->fd >= 0) ::close(l->fd);
    l->fd = -1;
  }
  if (epoll_ >= 0) ::close(epoll_);
  if (wake_ >= 0) ::close(wake_);
  if (reserve_ >= 0) ::close(reserve_);
  epoll_ = wake_ = reserve_ = -1;
}

HttpLoopStats HttpLoop::stats() const {
  MutexLock lock(&mu_);
  HttpLoopStats s = stats_;
  s.parked = static_cast<int64_t>(parked_.size());
  return s;
}

// ---- Topics ----

void HttpLoop::Notify(const std::string& topic) {
  MutexLock lock(&mu_);
  ++seq_;
  recent_.emplace_back(std::hash<std::string>{}(topic), seq_);
  if (recent_.size() > kRecentNotifications) recent_.pop_front();
  auto it = by_topic_.find(topic);
  if (it == by_topic_.end()) return;
  const std::vector<uint64_t> ids(it->second.begin(), it->second.end());
  for (uint64_t id : ids) UnparkLocked(id, /*expired=*/false);
}

bool HttpLoop::NotifiedSinceLocked(const std::string& topic, uint64_t seq) const {
  if (seq_ == seq) return false;
  if (recent_.empty() || recent_.front().second > seq + 1) return true;  // forgotten
  const size_t h = std::hash<std::string>{}(topic);
  for (auto it = recent_.rbegin(); it != recent_.rend() && it->second > seq; ++it) {
    if (it->first == h) return true;
  }
  return false;
}

void HttpLoop::UnparkLocked(uint64_t conn, bool expired) {
  auto it = parked_.find(conn);
  if (it == parked_.end()) return;
  auto t = by_topic_.find(it->second.topic);
  if (t != by_topic_.end()) {
    t->second.erase(conn);
    if (t->second.empty()) by_topic_.erase(t);
  }
  Task task = std::move(it->second.task);
  task.expired = expired;
  parked_.erase(it);
  tasks_.push_back(std::move(task));
  work_cv_.Signal();
}

// ---- Handler threads ----

void HttpLoop::Worker() {
  for (;;) {
    Task task;
    {
      MutexLock lock(&mu_);
      while (tasks_.empty() && !workers_stop_) work_cv_.Wait();
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      task.seq = seq_;
    }
    LongPoll poll;
    poll.started_ = task.started;
    poll.expired_ = task.expired || stopping_.load();
    httplib::Response res;
    httplib::Request& req = *task.req;
    req.matches = httplib::Match();
    router_->Handle(req, res, poll);
    std::string bytes;
    bool close = false;
    if (!poll.wait_) {
      close = !task.keep_alive ||
              strcasecmp(res.get_header_value("Connection").c_str(), "close") == 0;
      bytes = Serialize(res, close, task.head_only);
    }
    MutexLock lock(&mu_);
    if (poll.wait_) {
      if (stopping_.load() || steady_clock::now() >= poll.deadline_) {
        task.expired = true;
        tasks_.push_back(std::move(task));
        work_cv_.Signal();
      } else if (NotifiedSinceLocked(poll.topic_, task.seq)) {
        tasks_.push_back(std::move(task));  // it changed while this run looked
        work_cv_.Signal();
      } else {
        const uint64_t id = task.conn;
        by_topic_[poll.topic_].insert(id);
        parked_[id] = Parked{std::move(task), poll.topic_, poll.deadline_};
      }
      continue;
    }
    done_.push_back(Done{task.conn, std::move(bytes), close});
    if (done_.size() == 1) {
      const uint64_t one = 1;
      (void)!::write(wake_, &one, sizeof one);
    }
  }
}

// ---- The epoll thread ----

void HttpLoop::Run() {
  std::vector<epoll_event> events(512);
  SteadyTime next_tick = steady_clock::now();
  while (!stopping_.load()) {
    const int n =
        ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 100);
    const SteadyTime now = steady_clock::now();
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) {
        uint64_t v;
        while (::read(wake_, &v, sizeof v) > 0) {
        }
        continue;
      }
      if (tag & kListenerBit) {
        Accept(*listeners_[tag & ~kListenerBit]);
        continue;
      }
      auto it = conns_.find(tag);
      if (it != conns_.end() && !it->second->dead) OnEvent(*it->second, events[i].events);
    }
    TakeDone();
    if (now >= next_tick) {
      Tick(now);
      next_tick = now + milliseconds(100);
    }
    for (uint64_t id : graveyard_) conns_.erase(id);
    graveyard_.clear();
  }
}

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

void HttpLoop::Parse(Conn& c) {
  while (c.phase == Conn::Phase::kHead || c.phase == Conn::Phase::kBody) {
    if (c.phase == Conn::Phase::kHead) {
      // Empty lines before a request are allowed (RFC 9112 §2.2).
      while (c.in.size() - c.in_off >= 2 && c.in.compare(c.in_off, 2, "\r\n") == 0) {
        c.in_off += 2;
      }
      const size_t line = c.in.find("\r\n", c.in_off);
      if ((line == std::string::npos ? c.in.size() : line) - c.in_off > kMaxRequestLine) {
        return Fail(c, 414,
                    "the request line is longer than " + std::to_string(kMaxRequestLine) +
                        " bytes");
      }
      const size_t end = c.in.find("\r\n\r\n", c.in_off);
      if (end == std::string::npos) {
        if (c.in.size() - c.in_off > options_.max_header_bytes) {
          return Fail(c, 431,
                      "the request's head is larger than " +
                          std::to_string(options_.max_header_bytes) + " bytes");
        }
        return;
      }
      if (end - c.in_off > options_.max_header_bytes) {
        return Fail(c, 431,
                    "the request's head is larger than " +
                        std::to_string(options_.max_header_bytes) + " bytes");
      }
      if (!ParseHead(c, end)) return;
      c.in_off = end + 4;
      if (c.phase == Conn::Phase::kHead) return;  // failed
    }
    if (c.phase == Conn::Phase::kBody) {
      if (!ParseBody(c)) return;
      Dispatch(c);
      return;
    }
  }
}

bool HttpLoop::ParseHead(Conn& c, size_t end) {
  const std::string_view head(c.in.data() + c.in_off, end - c.in_off);
  auto req = std::make_shared<httplib::Request>();
  const size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos) {
    Fail(c, 400, "bad request line");
    return false;
  }
  req->method = std::string(line.substr(0, sp1));
  req->target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  req->version = std::string(line.substr(sp2 + 1));
  static const char* const kMethods[] = {"GET",    "HEAD",    "POST", "PUT",
                                         "DELETE", "OPTIONS", "PATCH"};
  if (std::none_of(std::begin(kMethods), std::end(kMethods),
                   [&](const char* m) { return req->method == m; })) {
    Fail(c, 400, "unknown request method '" + req->method.substr(0, 20) + "'");
    return false;
  }
  if (req->version != "HTTP/1.1" && req->version != "HTTP/1.0") {
    Fail(c, req->version.rfind("HTTP/", 0) == 0 ? 505 : 400,
         "unsupported protocol version '" + req->version.substr(0, 20) + "'");
    return false;
  }
  if (req->target.empty() || req->target[0] != '/') {
    Fail(c, 400, "the request target must be a path");
    return false;
  }
  const size_t q = req->target.find('?');
  req->path = httplib::detail::decode_url(req->target.substr(0, q), false);
  if (q != std::string::npos) {
    httplib::detail::parse_query_text(req->target.substr(q + 1), req->params);
  }
  size_t pos = line_end == std::string_view::npos ? head.size() : line_end + 2;
  bool has_length = false;
  size_t headers = 0;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string_view::npos) e = head.size();
    const std::string_view h = head.substr(pos, e - pos);
    pos = e + 2;
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0 ||
        !std::all_of(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(colon),
                     IsTokenChar)) {
      Fail(c, 400, "bad header line");
      return false;
    }
    if (++headers > kMaxHeaders) {
      Fail(c, 431, "more than " + std::to_string(kMaxHeaders) + " headers");
      return false;
    }
    std::string name(h.substr(0, colon));
    std::string value = Trim(h.substr(colon + 1));
    if (strcasecmp(name.c_str(), kPeerCredHeader) == 0) continue;  // only the kernel's
    if (strcasecmp(name.c_str(), "Content-Length") == 0) {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(),
                       [](char ch) { return ch >= '0' && ch <= '9'; })) {
        Fail(c, value.size() > 18 ? 413 : 400,
             "bad Content-Length '" + value.substr(0, 24) + "'");
        return false;
      }
      const size_t n = std::stoull(value);
      if (has_length && n != c.content_length) {
        Fail(c, 400, "two different Content-Length headers");
        return false;
      }
      has_length = true;
      c.content_length = n;
    }
    req->headers.emplace(std::move(name), std::move(value));
  }
  if (!c.peer_cred.empty()) req->headers.emplace(kPeerCredHeader, c.peer_cred);
  req->remote_addr = c.remote_addr;
  req->remote_port = c.remote_port;

  const std::string te = req->get_header_value("Transfer-Encoding");
  c.chunked = false;
  if (!te.empty()) {
    if (strcasecmp(te.c_str(), "chunked") != 0) {
      Fail(c, 501, "Transfer-Encoding '" + te.substr(0, 40) + "' is not supported");
      return false;
    }
    if (has_length) {
      Fail(c, 400, "both Content-Length and Transfer-Encoding");
      return false;
    }
    c.chunked = true;
    c.chunk = Conn::Chunk::kSize;
  } else if (!has_length) {
    c.content_length = 0;
  }
  if (!c.chunked && c.content_length > options_.max_body_bytes) {
    {
      MutexLock lock(&mu_);
      ++stats_.too_large;
    }
    Fail(c, 413,
         "request body too large: " + std::to_string(c.content_length) +
             " bytes; at most " + std::to_string(options_.max_body_bytes));
    return false;
  }
  const std::string conn = req->get_header_value("Connection");
  c.keep_alive = req->version == "HTTP/1.1" ? strcasecmp(conn.c_str(), "close") != 0
                                            : strcasecmp(conn.c_str(), "keep-alive") == 0;
  c.head_only = req->method == "HEAD";
  if (strcasecmp(req->get_header_value("Expect").c_str(), "100-continue") == 0 &&
      (c.chunked || c.content_length > 0)) {
    Queue(c, "HTTP/1.1 100 Continue\r\n\r\n", false);
    if (c.dead) return false;
  }
  c.req = std::move(req);
  c.phase = Conn::Phase::kBody;
  const int64_t size = c.chunked ? static_cast<int64_t>(options_.max_body_bytes)
                                 : static_cast<int64_t>(c.content_length);
  c.deadline = steady_clock::now() + milliseconds(options_.body_timeout_ms) +
               milliseconds(size * 1000 / std::max<int64_t>(1, options_.body_min_rate));
  return true;
}

bool HttpLoop::ParseBody(Conn& c) {
  std::string& body = c.req->body;
  if (!c.chunked) {
    const size_t have = c.in.size() - c.in_off;
    const size_t need = c.content_length - body.size();
    const size_t take = std::min(have, need);
    body.append(c.in, c.in_off, take);
    c.in_off += take;
    return body.size() == c.content_length;
  }
  for (;;) {
    const size_t have = c.in.size() - c.in_off;
    switch (c.chunk) {
      case Conn::Chunk::kSize:
      case Conn::Chunk::kTrailer: {
        const size_t e = c.in.find("\r\n", c.in_off);
        if (e == std::string::npos) {
          if (have > kMaxChunkLine) {
            Fail(c, 400, "a chunk line longer than 1 KiB");
            return false;
          }
          return false;
        }
        const std::string line = c.in.substr(c.in_off, e - c.in_off);
        c.in_off = e + 2;
        if (c.chunk == Conn::Chunk::kTrailer) {
          if (line.empty()) return true;  // the end of the body
          continue;                       // a trailer field: ignored
        }
        const std::string hex = Trim(line.substr(0, line.find(';')));
        if (hex.empty() || hex.size() > 15 ||
            !std::all_of(hex.begin(), hex.end(), [](char ch) {
              return std::isxdigit(static_cast<unsigned char>(ch));
            })) {
          Fail(c, 400, "bad chunk size '" + hex.substr(0, 20) + "'");
          return false;
        }
        const size_t n = std::stoull(hex, nullptr, 16);
        if (n > options_.max_body_bytes - body.size()) {
          {
            MutexLock lock(&mu_);
            ++stats_.too_large;
          }
          Fail(c, 413,
               "request body too large: more than " +
                   std::to_string(options_.max_body_bytes) + " bytes");
          return false;
        }
        if (n == 0) {
          c.chunk = Conn::Chunk::kTrailer;
        } else {
          c.chunk_left = n;
          c.chunk = Conn::Chunk::kData;
        }
        break;
      }
      case Conn::Chunk::kData: {
        const size_t take = std::min(have, c.chunk_left);
        body.append(c.in, c.in_off, take);
        c.in_off += take;
        c.chunk_left -= take;
        if (c.chunk_left > 0) return false;
        c.chunk = Conn::Chunk::kDataEnd;
        break;
      }
      case Conn::Chunk::kDataEnd:
        if (have < 2) return false;
        if (c.in.compare(c.in_off, 2, "\r\n") != 0) {
          Fail(c, 400, "a chunk not followed by CRLF");
          return false;
        }
        c.in_off += 2;
        c.chunk = Conn::Chunk::kSize;
        break;
    }
  }
}

void HttpLoop::Dispatch(Conn& c) {
  // What is left in the buffer is the start of the next request (pipelined).
  c.in.erase(0, c.in_off);
  c.in_off = 0;
  c.phase = Conn::Phase::kBusy;
  Task t;
  t.conn = c.id;
  t.req = std::move(c.req);
  t.keep_alive = c.keep_alive;
  t.head_only = c.head_only;
  t.started = steady_clock::now();
  MutexLock lock(&mu_);
  ++stats_.requests;
  tasks_.push_back(std::move(t));
  work_cv_.Signal();
}

void HttpLoop::Fail(Conn& c, int status, const std::string& message) {
  c.phase = Conn::Phase::kClosing;
  c.req.reset();
  Queue(c, ErrorReply(status, message), /*close=*/true);
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

void HttpLoop::TakeDone() {
  std::vector<Done> done;
  {
    MutexLock lock(&mu_);
    done.swap(done_);
  }
  for (Done& d : done) {
    auto it = conns_.find(d.conn);
    if (it == conns_.end() || it->second->dead) continue;  // the client went away
    Conn& c = *it->second;
    // The next request (if already buffered) is read once this reply is out.
    c.phase = d.close ? Conn::Phase::kClosing : Conn::Phase::kHead;
    c.started_request = !c.in.empty();
    Queue(c, std::move(d.bytes), d.close);
    if (c.dead || c.phase != Conn::Phase::kHead) continue;
    if (!c.in.empty()) Parse(c);
    if (c.dead) continue;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    if (c.ssl != nullptr && c.phase == Conn::Phase::kHead && SSL_pending(c.ssl) > 0) {
      ReadSome(c);
      if (c.dead) continue;
    }
#endif
    Rearm(c);
  }
}

void HttpLoop::Tick(SteadyTime now) {
  std::vector<uint64_t> expired;
  for (auto& [id, c] : conns_) {
    if (c->dead) continue;
    if (c->phase == Conn::Phase::kBusy && c->out_off == c->out.size()) continue;
    if (now < c->deadline) continue;
    expired.push_back(id);
  }
  for (uint64_t id : expired) {
    Conn& c = *conns_.at(id);
    if (c.dead) continue;
    const bool reading = c.phase == Conn::Phase::kHead || c.phase == Conn::Phase::kBody;
    if (reading && c.started_request && c.out_off == c.out.size()) {
      {
        MutexLock lock(&mu_);
        ++stats_.timed_out;
      }
      Fail(c, 408,
           c.phase == Conn::Phase::kHead ? "the request's head did not arrive in time"
                                         : "the request's body did not arrive in time");
      // The reply is best effort; the connection goes now either way.
      Close(id);
    } else {
      if (!reading) {
        MutexLock lock(&mu_);
        ++stats_.timed_out;
      }
      Close(id);  // idle keep-alive, or a reply the client does not read
    }
  }
  MutexLock lock(&mu_);
  std::vector<uint64_t> due;
  for (const auto& [id, p] : parked_) {
    if (now >= p.deadline) due.push_back(id);
  }
  for (uint64_t id : due) UnparkLocked(id, /*expired=*/true);
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
