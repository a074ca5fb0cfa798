// HttpRouter: the API's routes as cpp-httplib's Server declares them (Get, Post, Delete,
// pre-routing, error and exception handlers; the same Request and Response types), plus
// GetPoll for a long poll that may wait (LongPoll::WaitFor). The connection layer
// (server/http_loop.h) runs requests through it on its handler threads.
//
// Thread-safety: add routes from one thread before serving; Handle from any thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <exception>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "core/status.h"

namespace hachi::server {

using SteadyTime = std::chrono::steady_clock::time_point;

// What a long-poll handler is given: when the request first ran, whether its deadline
// passed (then it must answer with what there is), and how to wait for more.
class LongPoll {
 public:
  SteadyTime started() const { return started_; }
  bool expired() const { return expired_; }
  // The request's first run (not one after a wait).
  bool first() const { return first_; }
  // No answer yet: the request runs again once `topic` is notified, or at `deadline`
  // (then expired() is true). The response written by this run is dropped.
  void WaitFor(std::string topic, SteadyTime deadline) {
    wait_ = true;
    topic_ = std::move(topic);
    deadline_ = deadline;
  }

 private:
  friend class HttpLoop;
  friend class HttpRouter;
  SteadyTime started_{};
  bool expired_ = false;
  bool first_ = true;
  bool wait_ = false;
  std::string topic_;
  SteadyTime deadline_{};
};

// Who sent a request, read from its head alone, as the connection layer (server/
// http_loop.h) bounds its connections and the bodies it reads: per user, nothing for
// agents and admins, and anonymous callers the first to go. A request refused here is
// answered without a byte of its body read.
struct Admission {
  enum class Peer {
    kAnonymous,   // no credentials (or the health check's): bounded by address
    kUser,        // `user`'s connections and bodies counted together, whatever address
    kPrivileged,  // an agent (the cluster secret) or an admin: room always kept
  };
  Status status;  // not ok: refused (its code gives the HTTP status)
  Peer peer = Peer::kAnonymous;
  std::string user;
};

// The routes: cpp-httplib's Server interface for what Hachi uses, plus GetPoll.
class HttpRouter {
 public:
  using Request = httplib::Request;
  using Response = httplib::Response;
  using Handler = std::function<void(const Request&, Response&)>;
  using PollHandler = std::function<void(const Request&, Response&, LongPoll&)>;
  using HandlerResponse = httplib::Server::HandlerResponse;
  using PreRouting = std::function<HandlerResponse(const Request&, Response&)>;
  using Admit = std::function<Admission(const Request&)>;
  using ExceptionHandler =
      std::function<void(const Request&, Response&, std::exception_ptr)>;

  void Get(const std::string& pattern, Handler h);
  void Post(const std::string& pattern, Handler h);
  void Delete(const std::string& pattern, Handler h);
  // A GET that may wait (LongPoll::WaitFor).
  void GetPoll(const std::string& pattern, PollHandler h);
  // A route of any method ("GET", "POST", "DELETE"); `h` may wait, as GetPoll's.
  void Add(const char* method, const std::string& pattern, PollHandler h);
  void set_pre_routing_handler(PreRouting h) { pre_routing_ = std::move(h); }
  // Who sent a request and whether its body may be read (Admission); without one every
  // request is admitted as anonymous.
  void set_admission_handler(Admit h) { admit_ = std::move(h); }
  Admission Admitted(const Request& req) const {
    return admit_ ? admit_(req) : Admission{};
  }
  // Called for every reply of status 400 or more (routed or not: 404 for no route).
  void set_error_handler(Handler h) { error_ = std::move(h); }
  void set_exception_handler(ExceptionHandler h) { exception_ = std::move(h); }
  // Headers every reply carries (the leader's epoch, docs/ha.md).
  void set_reply_headers(httplib::Headers h) { reply_headers_ = std::move(h); }

  // The request through the pre-routing handler and the first route whose method and
  // pattern (std::regex_match on the path; groups in req.matches) fit. HEAD runs GET's.
  void Handle(Request& req, Response& res, LongPoll& poll) const;

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    PollHandler handler;
  };

  std::vector<Route> routes_;
  PreRouting pre_routing_;
  Admit admit_;
  Handler error_;
  ExceptionHandler exception_;
  httplib::Headers reply_headers_;
};

}  // namespace hachi::server
