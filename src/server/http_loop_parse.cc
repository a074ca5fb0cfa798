// HTTP/1.1 on the wire for HttpLoop (server/http_loop_conn.h): a request's head and
// body read from a connection's buffer under the bounds of HttpLoopOptions, and the
// replies' bytes.
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>

#include "api/protocol_json.h"
#include "server/http_loop_conn.h"

namespace hachi::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr size_t kMaxHeaders = 100;
constexpr size_t kMaxRequestLine = 8192;
constexpr size_t kMaxChunkLine = 1024;

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

std::string SerializeReply(const httplib::Response& res, bool close, bool head_only) {
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
  return SerializeReply(res, /*close=*/true, false);
}

std::string ErrorReply(const Status& s) {
  httplib::Response res;
  res.status = api::HttpStatusFor(s.code());
  if (s.code() == StatusCode::kUnauthenticated) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"hachi\"");
  }
  res.set_content(api::ErrorToJson(s), "application/json");
  return SerializeReply(res, /*close=*/true, false);
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
      if (c.phase != Conn::Phase::kBody) return;  // failed, or waits for its Admission
    }
    if (c.phase == Conn::Phase::kBody) {
      if (!ParseBody(c)) return;
      Dispatch(c);
      return;
    }
  }
}

// The head in c.in from c.in_off to `end` (its blank line): the request line, the
// fields, then how the body comes. False after a Fail (or a hang-up on 100 Continue).
bool HttpLoop::ParseHead(Conn& c, size_t end) {
  const std::string_view head(c.in.data() + c.in_off, end - c.in_off);
  auto req = std::make_shared<httplib::Request>();
  const size_t line_end = head.find("\r\n");
  if (!ParseRequestLine(c, head.substr(0, line_end), *req)) return false;
  const size_t fields = line_end == std::string_view::npos ? head.size() : line_end + 2;
  bool has_length = false;
  if (!ParseFields(c, head.substr(fields), *req, &has_length)) return false;
  if (!c.peer_cred.empty()) req->headers.emplace(kPeerCredHeader, c.peer_cred);
  req->remote_addr = c.remote_addr;
  req->remote_port = c.remote_port;
  if (!ParseFraming(c, *req, has_length)) return false;

  const std::string conn = req->get_header_value("Connection");
  c.keep_alive = req->version == "HTTP/1.1" ? strcasecmp(conn.c_str(), "close") != 0
                                            : strcasecmp(conn.c_str(), "keep-alive") == 0;
  c.head_only = req->method == "HEAD";
  c.req = std::move(req);
  if ((c.chunked || c.content_length > 0) && !c.unix_socket &&
      c.peer == Admission::Peer::kAnonymous) {
    // Who sends a body is asked before it is read (a handler thread asks: the gate may
    // wait for locks); Admitted goes on from there.
    c.phase = Conn::Phase::kAdmit;
    c.deadline = steady_clock::now() + milliseconds(options_.body_timeout_ms);
    Task t;
    t.conn = c.id;
    t.req = c.req;
    t.admit_only = true;
    t.started = steady_clock::now();
    MutexLock lock(&mu_);
    tasks_.push_back(std::move(t));
    work_cv_.Signal();
    return true;
  }
  return StartBody(c);
}

void HttpLoop::Admitted(Conn& c, const Admission& a) {
  if (c.phase != Conn::Phase::kAdmit) return;
  if (!a.status.ok()) {
    {
      MutexLock lock(&mu_);
      ++stats_.refused_on_head;
    }
    c.phase = Conn::Phase::kClosing;
    c.req.reset();
    Queue(c, ErrorReply(a.status), /*close=*/true);
    return;
  }
  Identify(c, a);
  if (!StartBody(c)) return;
  Parse(c);  // what of the body came with the head
  if (!c.dead) Rearm(c);
}

bool HttpLoop::StartBody(Conn& c) {
  const bool has_body = c.chunked || c.content_length > 0;
  if (!c.chunked && !ReserveBody(c, static_cast<int64_t>(c.content_length))) return false;
  if (has_body &&
      strcasecmp(c.req->get_header_value("Expect").c_str(), "100-continue") == 0) {
    Queue(c, "HTTP/1.1 100 Continue\r\n\r\n", false);
    if (c.dead) return false;
  }
  if (!c.chunked) c.req->body.reserve(c.content_length);  // counted: reserve exactly
  c.phase = Conn::Phase::kBody;
  const int64_t size = c.chunked ? static_cast<int64_t>(options_.max_body_bytes)
                                 : static_cast<int64_t>(c.content_length);
  c.deadline = steady_clock::now() + milliseconds(options_.body_timeout_ms) +
               milliseconds(size * 1000 / std::max<int64_t>(1, options_.body_min_rate));
  return true;
}

// "METHOD TARGET VERSION": a known method, HTTP/1.0 or 1.1, a path (decoded) and its
// query's parameters.
bool HttpLoop::ParseRequestLine(Conn& c, std::string_view line, httplib::Request& req) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos) {
    Fail(c, 400, "bad request line");
    return false;
  }
  req.method = std::string(line.substr(0, sp1));
  req.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  req.version = std::string(line.substr(sp2 + 1));
  static const char* const kMethods[] = {"GET",    "HEAD",    "POST", "PUT",
                                         "DELETE", "OPTIONS", "PATCH"};
  if (std::none_of(std::begin(kMethods), std::end(kMethods),
                   [&](const char* m) { return req.method == m; })) {
    Fail(c, 400, "unknown request method '" + req.method.substr(0, 20) + "'");
    return false;
  }
  if (req.version != "HTTP/1.1" && req.version != "HTTP/1.0") {
    Fail(c, req.version.rfind("HTTP/", 0) == 0 ? 505 : 400,
         "unsupported protocol version '" + req.version.substr(0, 20) + "'");
    return false;
  }
  if (req.target.empty() || req.target[0] != '/') {
    Fail(c, 400, "the request target must be a path");
    return false;
  }
  const size_t q = req.target.find('?');
  req.path = httplib::detail::decode_url(req.target.substr(0, q), false);
  if (q != std::string::npos) {
    httplib::detail::parse_query_text(req.target.substr(q + 1), req.params);
  }
  return true;
}

// The header fields, at most kMaxHeaders; a client's X-Hachi-Peer-Cred is dropped (only
// the kernel's counts); Content-Length read into c.content_length (*has_length).
bool HttpLoop::ParseFields(Conn& c, std::string_view fields, httplib::Request& req,
                           bool* has_length) {
  size_t pos = 0;
  size_t headers = 0;
  while (pos < fields.size()) {
    size_t e = fields.find("\r\n", pos);
    if (e == std::string_view::npos) e = fields.size();
    const std::string_view h = fields.substr(pos, e - pos);
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
      if (*has_length && n != c.content_length) {
        Fail(c, 400, "two different Content-Length headers");
        return false;
      }
      *has_length = true;
      c.content_length = n;
    }
    req.headers.emplace(std::move(name), std::move(value));
  }
  return true;
}

// How the body comes: chunked, or Content-Length bytes (none without it), refused
// (413) past max_body_bytes before a byte of it is read.
bool HttpLoop::ParseFraming(Conn& c, const httplib::Request& req, bool has_length) {
  const std::string te = req.get_header_value("Transfer-Encoding");
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
        if (!ReserveBody(c, static_cast<int64_t>(n))) return false;
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
  t.classify = !c.unix_socket && c.peer == Admission::Peer::kAnonymous;
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

}  // namespace hachi::server
