// HttpLoop: the server's connection layer — HTTP/1.1 on TCP (optionally TLS)
// and on a Unix socket, with one epoll thread for every connection and a small pool of
// handler threads. An idle connection (a keep-alive client, an agent's work long poll, a
// `hachi run` waiting for its job) costs a descriptor and a few KB, never a thread:
// a handler that cannot answer yet parks its request on a topic ("agent/n7", "job/42")
// and the request runs again when someone calls Notify(topic), or at its deadline.
//
// What a client cannot do to it (each measured in http_loop_test.cc):
//   - hold it with slow bytes: a request's head must be complete within header_timeout
//     of its first byte, and its body within body_timeout (+ the body's size at
//     body_min_rate) of the head: deadlines that do not restart on each byte;
//   - make it read a large body: Content-Length past max_body_bytes is refused (413)
//     before a byte of it is read, and a chunked body as soon as its decoded size passes
//     max_body_bytes;
//   - take every descriptor: connections from one TCP address (max_per_address), of one
//     Unix-socket uid (max_per_uid; root and the server's own uid go unbounded) and of
//     one user over TCP (max_per_user, once a request on it says who it is: a token's
//     user; agents and admins unbounded) are bounded, and so is the total (the
//     open-files limit, raised at Start to the hard limit, minus a reserve), with room
//     always kept for the Unix socket. When TCP is full, anonymous connections that
//     wait for nothing (idle, or a head still coming) are closed to make room, longest
//     idle first: an agent or a user with a token always gets in. A refused connection
//     gets a 503 that says why;
//   - make it read a body from someone it will refuse: the gate (HttpRouter's
//     Admission) answers on the head, before a byte of the body is read, and bodies
//     being read or handled are bounded in all and per user;
//   - make it hold replies: a connection's next request is read only once the client
//     has taken its replies (max_reply_backlog), so pipelining without reading costs
//     one reply.
//
// The routes are those of cpp-httplib's Server (same Request and Response types, same
// pre-routing, error and exception handlers), so the API's handlers are unchanged;
// only the connection handling is ours. On the Unix socket every request carries the
// kernel's SO_PEERCRED of its peer in the X-Hachi-Peer-Cred header ("UID GID PID"),
// any the client sent being removed first.
//
// Its files: http_loop.cc (setup, the epoll round, handler threads, topics),
// http_loop_conn.cc (accept and its bounds, reads, writes, TLS), http_loop_parse.cc
// (HTTP/1.1 heads, bodies, replies); their shared insides are in http_loop_conn.h.
//
// Thread-safety: configure (Listen*, Start) and Stop from one thread; Notify from any
// thread at any time (it takes the loop's own lock briefly and never calls a handler).
// Lock order: whatever the caller of Notify holds, then the loop's lock.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "server/http_loop_options.h"
#include "server/http_router.h"

namespace hachi::server {

// The header that carries a Unix-socket peer's SO_PEERCRED ("UID GID PID"): set here, and
// by the vendored httplib server (third_party/cpp-httplib/README.md), after removing any
// a client sent; read by the auth gate (server/http_auth.cc).
inline constexpr char kPeerCredHeader[] = "X-Hachi-Peer-Cred";

class HttpLoop {
 public:
  HttpLoop(const HttpRouter* router, HttpLoopOptions options);
  ~HttpLoop();
  HttpLoop(const HttpLoop&) = delete;
  HttpLoop& operator=(const HttpLoop&) = delete;

  // Before Start. TLS, when set, applies to the TCP listeners added after it (PEM files).
  Status UseTls(const std::string& cert_file, const std::string& key_file);
  // Binds HOST:PORT (port 0: any free one) and returns the port bound.
  Result<int> ListenTcp(const std::string& host, int port);
  // Binds a Unix socket at `path` (a stale one is removed first), mode 0666.
  Status ListenUnix(const std::string& path);

  // Raises the open-files limit to the hard limit (saying so on stderr once) and starts
  // the loop and the handler threads.
  Status Start();
  // Parked requests are answered (expired), then every connection closed. Idempotent.
  void Stop();

  // Runs again every request parked on `topic`. Cheap; safe under any caller's lock.
  void Notify(const std::string& topic);

  HttpLoopStats stats() const;

 private:
  struct Conn;
  struct Listener;
  struct Task {
    uint64_t conn = 0;
    std::shared_ptr<httplib::Request> req;
    bool keep_alive = true;
    bool head_only = false;
    SteadyTime started{};
    bool expired = false;
    bool ran = false;         // it ran before (LongPoll::first)
    uint64_t seq = 0;         // notifications before this run began
    bool admit_only = false;  // only HttpRouter::Admitted, before the body is read
    bool classify = false;    // and Admitted before it runs: the connection is anonymous
  };
  struct Parked {
    Task task;
    std::string topic;
    SteadyTime deadline{};
  };
  struct Done {
    uint64_t conn = 0;
    std::string bytes;  // the whole reply
    bool close = false;
    bool admit_only = false;
    bool classified = false;
    Admission admission;  // admit_only or classified
  };

  void Run();         // the epoll thread
  void Worker();      // a handler thread
  void Post(Done d);  // to the epoll thread
  void PostLocked(Done d) REQUIRES(mu_);
  void Accept(Listener& l);
  void OnEvent(Conn& c, uint32_t events);
  void ReadSome(Conn& c);
  void Parse(Conn& c);  // as many requests as the buffer holds (one at a time)
  bool ParseHead(Conn& c, size_t end);
  bool ParseRequestLine(Conn& c, std::string_view line, httplib::Request& req);
  bool ParseFields(Conn& c, std::string_view fields, httplib::Request& req,
                   bool* has_length);
  bool ParseFraming(Conn& c, const httplib::Request& req, bool has_length);
  bool ParseBody(Conn& c);
  // After the head (and its Admission): 100 Continue, the body's bytes reserved, the
  // body's deadline. False after a Fail.
  bool StartBody(Conn& c);
  void Admitted(Conn& c, const Admission& a);  // the admit_only task's answer
  void Identify(Conn& c, const Admission& a);  // count it as its caller's
  bool ReserveBody(Conn& c, int64_t bytes);    // false: over a bound, and Failed
  void ReleaseBody(Conn& c);
  bool EvictAnonymous();  // closes the longest-idle anonymous ones; false: none
  size_t Backlog(const Conn& c) const;  // reply bytes the client has not taken
  void Dispatch(Conn& c);
  void Fail(Conn& c, int status, const std::string& message);  // reply, then close
  void Queue(Conn& c, std::string bytes, bool close);
  void Flush(Conn& c);
  void Close(uint64_t id);
  void Rearm(Conn& c);
  void Tick(SteadyTime now);
  void TakeDone();
  bool NotifiedSinceLocked(const std::string& topic, uint64_t seq) const REQUIRES(mu_);
  void UnparkLocked(uint64_t conn, bool expired) REQUIRES(mu_);

  const HttpRouter* const router_;
  const HttpLoopOptions options_;
  int max_connections_ = 0;
  uid_t self_uid_ = 0;
  void* tls_ctx_ = nullptr;  // SSL_CTX*, when UseTls
  int epoll_ = -1;
  int wake_ = -1;     // eventfd: replies are waiting, or Stop
  int reserve_ = -1;  // a spare descriptor: accept-and-refuse when out of them
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::thread loop_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};

  // The epoll thread's own (no lock).
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::vector<uint64_t> graveyard_;  // closed this round
  std::unordered_map<std::string, int> per_peer_;
  int tcp_conns_ = 0;
  int socket_reserve_ = 0;
  int64_t body_bytes_ = 0;  // reserved by bodies of users and anonymous callers
  std::unordered_map<std::string, int64_t> body_bytes_by_user_;
  uint64_t next_id_ = 1;

  mutable Mutex mu_;
  CondVar work_cv_{&mu_};
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  std::vector<Done> done_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Parked> parked_ GUARDED_BY(mu_);
  std::unordered_map<std::string, std::unordered_set<uint64_t>> by_topic_ GUARDED_BY(mu_);
  // The latest notifications (hash of the topic, sequence number), newest last: a run
  // that parks checks whether its topic was notified while it ran.
  std::deque<std::pair<size_t, uint64_t>> recent_ GUARDED_BY(mu_);
  uint64_t seq_ GUARDED_BY(mu_) = 0;
  bool workers_stop_ GUARDED_BY(mu_) = false;
  HttpLoopStats stats_ GUARDED_BY(mu_);
};

}  // namespace hachi::server
