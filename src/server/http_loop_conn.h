// HttpLoop's insides that its three files share (server/http_loop.h):
//   http_loop.cc        setup, the epoll round, handler threads, topics, deadlines
//   http_loop_conn.cc   accepting (and the bounds on who may connect), reads, writes,
//                       TLS records, closing
//   http_loop_parse.cc  HTTP/1.1 on the wire: heads, bodies, replies
// Internal to those files.
#pragma once

#include <httplib.h>

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
#include <openssl/ssl.h>
#endif

#include <cstdint>
#include <memory>
#include <string>

#include "server/http_loop.h"

namespace hachi::server {

struct HttpLoop::Listener {
  int fd = -1;
  bool unix_socket = false;
  bool tls = false;
  std::string path;  // the Unix socket's
};

struct HttpLoop::Conn {
  // kAdmit: the head waits for the caller's Admission before its body is read.
  enum class Phase { kHead, kAdmit, kBody, kBusy, kClosing };
  int fd = -1;
  uint64_t id = 0;
  bool unix_socket = false;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  SSL* ssl = nullptr;
#endif
  std::string peer_key;  // what max_per_address / _per_uid / _per_user count by
  bool bounded = true;   // counted against a per-peer bound
  // Who it is (HttpRouter::Admit): a TCP connection is anonymous, and first evicted,
  // until a request on it says otherwise; a Unix socket's is the kernel's uid.
  Admission::Peer peer = Admission::Peer::kAnonymous;
  bool over_bound = false;  // its user has too many: closed after this reply
  int64_t body_bytes = 0;   // reserved for the body being read or handled
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

// The bytes of `res` as an HTTP/1.1 reply: Content-Length set, "Connection: close"
// when `close`, no body for HEAD (`head_only`), 204 and 304.
std::string SerializeReply(const httplib::Response& res, bool close, bool head_only);
// A reply of the API's error body, then close: 503 unavailable, 5xx internal, else
// invalid argument.
std::string ErrorReply(int status, const std::string& message);
// The same for a Status (its code gives the HTTP status; 401 says how to authenticate).
std::string ErrorReply(const Status& s);

}  // namespace hachi::server
