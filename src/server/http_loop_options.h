// The knobs and counters of the server's connection layer (server/http_loop.h), apart
// from it so that HttpServer's users need not see cpp-httplib.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hachi::server {

struct HttpLoopOptions {
  size_t max_body_bytes = 4 << 20;     // larger bodies get 413, unread
  size_t max_header_bytes = 64 << 10;  // request line and headers; larger: 431
  int workers = 16;                    // handler threads
  int header_timeout_ms = 10000;       // first byte of a request to the end of its head
  int body_timeout_ms = 10000;         // end of the head to the end of the body, plus:
  int64_t body_min_rate = 64 << 10;    // bytes per second: a 4 MiB body gets 64 s more
  int idle_timeout_ms = 120000;        // a keep-alive connection with no request
  int write_timeout_ms = 30000;        // a reply the client does not read
  int max_connections = 0;             // 0: the open-files limit minus 256
  // Of those, kept for the Unix socket (TCP connections stop short of it); 0: an
  // eighth of max_connections, at least 16.
  int socket_reserve = 0;
  int max_per_address = 4096;  // TCP connections from one address not yet identified
  int max_per_uid = 1024;      // Unix-socket connections of one uid
  int max_per_user = 1024;     // TCP connections of one user (a token's, a job's)
  // A connection's next request is read only while the replies it has not taken are
  // under this: a client that pipelines and never reads holds one reply, not all.
  size_t max_reply_backlog = 64 << 10;
  // Bodies being read or handled (agents' and admins' apart): in all, and per user.
  int64_t max_body_bytes_in_flight = 64 << 20;
  int64_t max_body_bytes_per_user = 16 << 20;
};

// What the loop has seen since Start (GET /metrics could show it; tests read it).
struct HttpLoopStats {
  int64_t connections = 0;  // open now
  int64_t parked = 0;       // requests waiting on a topic now
  int64_t accepted = 0;
  int64_t requests = 0;
  int64_t refused_per_peer = 0;  // over max_per_address / max_per_uid
  int64_t refused_full = 0;      // over max_connections (or out of descriptors)
  int64_t timed_out = 0;         // header, body or write deadline
  int64_t too_large = 0;         // 413 before or while reading a body
  int64_t evicted_idle = 0;      // anonymous connections closed to make room
  int64_t refused_on_head = 0;   // a body never read: the caller was refused
  int64_t refused_bodies = 0;    // a body over max_body_bytes_in_flight / _per_user
  int64_t over_user_bound = 0;   // closed after a reply: over max_per_user
};

}  // namespace hachi::server
