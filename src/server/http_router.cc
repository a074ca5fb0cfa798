#include "server/http_router.h"

#include "api/protocol_json.h"
#include "core/status.h"

namespace hachi::server {

void HttpRouter::Add(const char* method, const std::string& pattern, PollHandler h) {
  routes_.push_back(Route{method, std::regex(pattern), std::move(h)});
}

void HttpRouter::Get(const std::string& pattern, Handler h) {
  Add("GET", pattern,
      [h = std::move(h)](const Request& q, Response& r, LongPoll&) { h(q, r); });
}
void HttpRouter::Post(const std::string& pattern, Handler h) {
  Add("POST", pattern,
      [h = std::move(h)](const Request& q, Response& r, LongPoll&) { h(q, r); });
}
void HttpRouter::Delete(const std::string& pattern, Handler h) {
  Add("DELETE", pattern,
      [h = std::move(h)](const Request& q, Response& r, LongPoll&) { h(q, r); });
}
void HttpRouter::GetPoll(const std::string& pattern, PollHandler h) {
  Add("GET", pattern, std::move(h));
}

void HttpRouter::Handle(Request& req, Response& res, LongPoll& poll) const {
  try {
    bool routed = false;
    if (pre_routing_ && pre_routing_(req, res) == HandlerResponse::Handled) {
      routed = true;
    } else {
      const std::string method = req.method == "HEAD" ? "GET" : req.method;
      for (const Route& r : routes_) {
        if (r.method != method) continue;
        if (std::regex_match(req.path, req.matches, r.pattern)) {
          r.handler(req, res, poll);
          routed = true;
          break;
        }
      }
    }
    if (poll.wait_) return;
    if (res.status == -1) res.status = routed ? 200 : 404;
  } catch (...) {
    poll.wait_ = false;
    res = Response();
    res.status = 500;
    if (exception_) {
      exception_(req, res, std::current_exception());
    } else {
      res.set_content(api::ErrorToJson(Internal("unexpected error")), "application/json");
    }
  }
  if (res.status >= 400 && error_) error_(req, res);
  for (const auto& [name, value] : reply_headers_) res.set_header(name, value);
}

}  // namespace hachi::server
