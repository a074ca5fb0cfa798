// The REST API's handlers (docs/api.md), one member function per route, one class per
// concern; the route table in HttpServer::Routes (http_api.cc) says which route runs
// which. A handler decodes its request, calls a service (through the Controller's
// accessors) and encodes the reply; none keeps state of its own. By concern:
//   http_jobs.cc     jobs: submit, test, list, get (a long poll), actions, usage
//   http_steps.cc    job steps: create, list, output (a long poll), input, signals
//   http_nodes.cc    nodes, partitions, stats, report, health, metrics
//   http_agents.cc   agents: registration, work (a long poll), health, burn-in, exits
//   http_tokens.cc   API tokens (admins only; the Controller checks)
//   web.cc           the dashboard's files and data (server/web.h)
// Internal to server/; includes httplib.
//
// Thread-safety: constant after construction; the handlers run on the server's handler
// threads at once and reach state only through the Controller and the HttpLoop's stats
// (both thread-safe).
#pragma once

#include <httplib.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "core/status.h"
#include "server/controller.h"
#include "server/http_router.h"
#include "server/web.h"

namespace hachi::server {

class HttpLoop;

// What every handler class reads: the services (through the Controller's accessors),
// the connection layer's stats, the dashboard's options. Constant after construction.
class HandlerBase {
 public:
  using Request = httplib::Request;
  using Response = httplib::Response;

  HandlerBase(Controller* controller, const HttpLoop* loop, DashboardOptions dashboard)
      : c_(controller), loop_(loop), dashboard_(std::move(dashboard)) {}

 protected:
  Controller* const c_;
  const HttpLoop* const loop_;
  const DashboardOptions dashboard_;
};

// Jobs (http_jobs.cc). The actions take ID or A_T (one task of array A) in matches 1
// and 2.
class JobHandlers : public HandlerBase {
 public:
  using HandlerBase::HandlerBase;
  void SubmitJob(const Request& req, Response& res) const;
  void TestSubmit(const Request& req, Response& res) const;
  void ListJobs(const Request& req, Response& res) const;
  void GetJob(const Request& req, Response& res, LongPoll& poll) const;
  void CancelJob(const Request& req, Response& res) const;
  void HoldJob(const Request& req, Response& res) const;
  void ReleaseJob(const Request& req, Response& res) const;
  void SignalJob(const Request& req, Response& res) const;
  void RequeueJob(const Request& req, Response& res) const;
  void UpdateJob(const Request& req, Response& res) const;
  void CompleteAllocation(const Request& req, Response& res) const;
  void JobUsage(const Request& req, Response& res) const;

 private:
  // A job action: the job, the array task (-1: the job, or the whole array) and who
  // asks, then `act` with the request's body; {"ok": true} when it succeeds.
  using JobAct =
      std::function<Status(state::JobId, int task, const Caller&, const std::string&)>;
  void JobAction(const Request& req, Response& res, const JobAct& act) const;
};

// Job steps (http_steps.cc): the job in match 1, the step in match 2.
class StepHandlers : public HandlerBase {
 public:
  using HandlerBase::HandlerBase;
  void CreateStep(const Request& req, Response& res) const;
  void ListJobSteps(const Request& req, Response& res) const;
  void ListAllSteps(const Request& req, Response& res) const;
  void StepOutput(const Request& req, Response& res, LongPoll& poll) const;
  void StepInput(const Request& req, Response& res) const;
  void SignalStep(const Request& req, Response& res) const;
  void CancelStep(const Request& req, Response& res) const;

 private:
  // A step action: the job, the step and who asks, then `act` with the request.
  using StepAct =
      std::function<Status(state::JobId, int step, const Caller&, const Request&)>;
  void StepAction(const Request& req, Response& res, const StepAct& act) const;
};

// Health, metrics, nodes, partitions, statistics (http_nodes.cc): a node's name in
// match 1.
class NodeHandlers : public HandlerBase {
 public:
  using HandlerBase::HandlerBase;
  void Health(const Request& req, Response& res) const;
  void Metrics(const Request& req, Response& res) const;
  void ListNodes(const Request& req, Response& res) const;
  void GetNode(const Request& req, Response& res) const;
  void DrainNode(const Request& req, Response& res) const;
  void ResumeNode(const Request& req, Response& res) const;
  void ListPartitions(const Request& req, Response& res) const;
  void ListPools(const Request& req, Response& res) const;
  void Stats(const Request& req, Response& res) const;
  void Report(const Request& req, Response& res) const;
  void Priority(const Request& req, Response& res) const;

 private:
  // The nodes as `req`'s caller may see them: stray processes' arguments are the
  // admins' (RedactStrayProcesses).
  std::vector<state::NodeStatus> NodesFor(const Request& req) const;
};

// Agents (http_agents.cc): the node in match 1.
class AgentHandlers : public HandlerBase {
 public:
  using HandlerBase::HandlerBase;
  void RegisterAgent(const Request& req, Response& res) const;
  void AgentWork(const Request& req, Response& res, LongPoll& poll) const;
  void AgentHealth(const Request& req, Response& res) const;
  void AgentBurnIn(const Request& req, Response& res) const;
  void AgentSteps(const Request& req, Response& res) const;
  void AgentExits(const Request& req, Response& res) const;
};

// API tokens (http_tokens.cc): the token's id in match 1.
class TokenHandlers : public HandlerBase {
 public:
  using HandlerBase::HandlerBase;
  void IssueToken(const Request& req, Response& res) const;
  void ListTokens(const Request& req, Response& res) const;
  void RevokeToken(const Request& req, Response& res) const;
};

// The dashboard (web.cc, server/web.h).
class WebHandlers : public HandlerBase {
 public:
  using HandlerBase::HandlerBase;
  void DashboardIndex(const Request& req, Response& res) const;
  void DashboardFile(const Request& req, Response& res) const;
  void History(const Request& req, Response& res) const;
  void JobLog(const Request& req, Response& res) const;
};

// Every route's target, one object per concern.
struct ApiHandlers {
  ApiHandlers(Controller* c, const HttpLoop* loop, const DashboardOptions& dashboard)
      : jobs(c, loop, dashboard),
        steps(c, loop, dashboard),
        nodes(c, loop, dashboard),
        agents(c, loop, dashboard),
        tokens(c, loop, dashboard),
        web(c, loop, dashboard) {}
  JobHandlers jobs;
  StepHandlers steps;
  NodeHandlers nodes;
  AgentHandlers agents;
  TokenHandlers tokens;
  WebHandlers web;
};

// Helpers the handlers share (http_api.cc).
void Reply(httplib::Response& res, int status, const std::string& body);
void ReplyError(httplib::Response& res, const Status& s);
void ReplyOk(httplib::Response& res);  // 200 {"ok":true}
// The job id in match 1; a 400 for one past 18 digits.
Result<state::JobId> JobIdOf(const httplib::Request& req);
// The job and step of /jobs/ID/steps/N/...: matches 1 and 2.
Result<std::pair<state::JobId, int>> StepIdOf(const httplib::Request& req);
// ?name= as an integer clamped to [lo, hi]; `fallback` when absent or not a number.
int IntParam(const httplib::Request& req, const char* name, int fallback, int lo, int hi);
// ?name= as an integer in [0, hi]; `fallback` when absent. Anything else is a 400 that
// names the parameter (a mistyped page size must not silently list everything).
Result<int64_t> NonNegativeParam(const httplib::Request& req, const char* name,
                                 int64_t fallback, int64_t hi);

}  // namespace hachi::server
