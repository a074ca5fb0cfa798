// The agents' handlers (server/http_handlers.h; docs/api.md, "Agents"). The gate lets
// only agents (the cluster secret) reach these (server/http_auth.h).
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "api/protocol_json.h"
#include "server/http_handlers.h"

namespace hachi::server {

using nlohmann::json;

void AgentHandlers::RegisterAgent(const Request& req, Response& res) const {
  Result<api::AgentRegistration> r = api::AgentRegistrationFromJson(req.body);
  if (!r.ok()) return ReplyError(res, r.status());
  Status st = c_->nodes().Register(*r, req.remote_addr);
  if (!st.ok()) return ReplyError(res, st);
  Reply(res, 200, json{{"ok", true}, {"lease_s", c_->nodes().lease()}}.dump());
}

// The agent's long poll (and heartbeat): work now, or parked on "agent/NODE" until the
// AgentHub has some for it (Launch, Cancel, Close notify) or wait_ms passed.
void AgentHandlers::AgentWork(const Request& req, Response& res, LongPoll& poll) const {
  const std::string node = req.matches[1];
  // The last batch the agent acted on; absent from an agent that does not acknowledge.
  int64_t ack = AgentHub::kNoAck;
  if (req.has_param("ack")) {
    const std::string a = req.get_param_value("ack");
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(a.c_str(), &end, 10);
    if (a.empty() || *end != '\0' || errno != 0 || a[0] == '-' ||
        v > static_cast<unsigned long long>(INT64_MAX)) {
      return ReplyError(res, InvalidArgument("ack: '" + a + "' is not a batch number"));
    }
    ack = static_cast<int64_t>(v);
  }
  // The agent's wall clock as it sent the poll: taken on the request's first run only
  // (a run after a wait would count the wait as offset).
  std::optional<int64_t> clock_ms;
  if (req.has_param("clock_ms") && poll.first()) {
    const std::string t = req.get_param_value("clock_ms");
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || errno != 0) {
      return ReplyError(res, InvalidArgument("clock_ms: '" + t +
                                             "' is not a time in ms since the epoch"));
    }
    clock_ms = v;
  }
  const api::AgentWork w = c_->nodes().Poll(node, 0, ack, clock_ms);
  const int wait_ms = IntParam(req, "wait_ms", 10000, 0, 60000);
  if (w.Empty() && !w.reregister && !poll.expired() && !c_->stopping() && wait_ms > 0) {
    return poll.WaitFor(AgentTopic(node),
                        poll.started() + std::chrono::milliseconds(wait_ms));
  }
  Reply(res, 200, api::AgentWorkToJson(w));
}

void AgentHandlers::AgentHealth(const Request& req, Response& res) const {
  Result<api::AgentHealth> h = api::AgentHealthFromJson(req.body);
  if (!h.ok()) return ReplyError(res, h.status());
  Status st = c_->nodes().ReportHealth(req.matches[1], *h);
  if (!st.ok()) return ReplyError(res, st);
  ReplyOk(res);
}

// A burn-in run's result (docs/burn-in.md).
void AgentHandlers::AgentBurnIn(const Request& req, Response& res) const {
  Result<api::BurnInReport> r = api::BurnInReportFromJson(req.body);
  if (!r.ok()) return ReplyError(res, r.status());
  Status st = c_->burn_in().Report(req.matches[1], *r);
  if (!st.ok()) return ReplyError(res, st);
  ReplyOk(res);
}

void AgentHandlers::AgentSteps(const Request& req, Response& res) const {
  Result<api::StepReports> r = api::StepReportsFromJson(req.body);
  if (!r.ok()) return ReplyError(res, r.status());
  Result<std::vector<api::StepAck>> acks = c_->steps().ReportSteps(req.matches[1], *r);
  if (!acks.ok()) return ReplyError(res, acks.status());
  Reply(res, 200, api::StepAcksToJson(*acks));
}

void AgentHandlers::AgentExits(const Request& req, Response& res) const {
  Result<std::vector<api::JobExit>> exits = api::JobExitsFromJson(req.body);
  if (!exits.ok()) return ReplyError(res, exits.status());
  Status st = c_->nodes().ReportExits(req.matches[1], *exits);
  if (!st.ok()) return ReplyError(res, st);
  ReplyOk(res);
}

}  // namespace hachi::server
