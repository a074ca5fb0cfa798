#include "server/http_loop.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
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

#include "server/http_loop_conn.h"

namespace hachi::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint64_t kListenerBit = uint64_t{1} << 63;
constexpr uint64_t kWakeTag = kListenerBit - 1;
constexpr size_t kRecentNotifications = 4096;

}  // namespace

// ---- Setup ----

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
  socket_reserve_ = options_.socket_reserve > 0 ? options_.socket_reserve
                                                : std::max(16, max_connections_ / 8);
  socket_reserve_ = std::clamp(socket_reserve_, 0, max_connections_ - 1);
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
    if (task.admit_only) {
      Done d;
      d.conn = task.conn;
      d.admit_only = true;
      d.admission = router_->Admitted(*task.req);
      Post(std::move(d));
      continue;
    }
    LongPoll poll;
    poll.started_ = task.started;
    poll.expired_ = task.expired || stopping_.load();
    poll.first_ = !task.ran;
    task.ran = true;
    httplib::Response res;
    httplib::Request& req = *task.req;
    req.matches = httplib::Match();
    router_->Handle(req, res, poll);
    // Asked here, not under mu_: the gate may take the callers' locks (Notify's order).
    Admission who;
    if (task.classify && !poll.wait_) who = router_->Admitted(req);
    std::string bytes;
    bool close = false;
    if (!poll.wait_) {
      close = !task.keep_alive ||
              strcasecmp(res.get_header_value("Connection").c_str(), "close") == 0;
      bytes = SerializeReply(res, close, task.head_only);
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
    Done d;
    d.conn = task.conn;
    d.bytes = std::move(bytes);
    d.close = close;
    if (task.classify) {
      d.classified = true;
      d.admission = std::move(who);
    }
    PostLocked(std::move(d));
  }
}

void HttpLoop::Post(Done d) {
  MutexLock lock(&mu_);
  PostLocked(std::move(d));
}

void HttpLoop::PostLocked(Done d) {
  done_.push_back(std::move(d));
  if (done_.size() == 1) {
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
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
    if (d.admit_only) {
      Admitted(c, d.admission);
      continue;
    }
    ReleaseBody(c);
    if (d.classified) Identify(c, d.admission);
    const bool close = d.close || c.over_bound;
    // The next request (if already buffered) is read once this reply is out.
    c.phase = close ? Conn::Phase::kClosing : Conn::Phase::kHead;
    c.started_request = !c.in.empty();
    Queue(c, std::move(d.bytes), close);
    if (c.dead || c.phase != Conn::Phase::kHead) continue;
    if (!c.in.empty() && Backlog(c) <= options_.max_reply_backlog) Parse(c);
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

}  // namespace hachi::server
