// The job steps' handlers (server/http_handlers.h; docs/api.md, "Steps").
#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "api/protocol_json.h"
#include "api/record_json.h"
#include "core/strings.h"
#include "server/http_auth.h"
#include "server/http_handlers.h"

namespace hachi::server {

void StepHandlers::CreateStep(const Request& req, Response& res) const {
  Result<state::JobId> id = JobIdOf(req);
  if (!id.ok()) return ReplyError(res, id.status());
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Result<api::StepRequest> r = api::StepRequestFromJson(req.body);
  if (!r.ok()) return ReplyError(res, r.status());
  Result<state::StepRecord> step = c_->steps().CreateStep(*id, *r, *who);
  if (!step.ok()) return ReplyError(res, step.status());
  Reply(res, 200, "{\"step\":" + api::StepRecordToJson(*step) + "}");
}

void StepHandlers::ListJobSteps(const Request& req, Response& res) const {
  Result<state::JobId> id = JobIdOf(req);
  if (!id.ok()) return ReplyError(res, id.status());
  if (Result<state::JobRecord> job = c_->job_views().Job(*id); !job.ok()) {
    return ReplyError(res, job.status());
  }
  Reply(res, 200, api::StepRecordsToJson(c_->steps().Steps(*id)));
}

// Every job's steps (sacct).
void StepHandlers::ListAllSteps(const Request&, Response& res) const {
  Reply(res, 200, api::StepRecordsToJson(c_->steps().Steps(0)));
}

// ?from=OFFSET&wait_ms=N: srun's long poll for its step's output, parked on "step/ID.S"
// until an agent's report brings some, the step ends, or N ms pass.
void StepHandlers::StepOutput(const Request& req, Response& res, LongPoll& poll) const {
  Result<std::pair<state::JobId, int>> key = StepIdOf(req);
  if (!key.ok()) return ReplyError(res, key.status());
  const state::JobId id = key->first;
  const int step = key->second;
  // ?from=OFFSET; ?run=START: the run the reader's step belongs to (0: the current).
  int64_t offsets[2] = {0, 0};
  const char* const kNames[2] = {"from", "run"};
  for (int i = 0; i < 2; ++i) {
    if (!req.has_param(kNames[i])) continue;
    const std::string f = req.get_param_value(kNames[i]);
    char* end = nullptr;
    errno = 0;
    offsets[i] = std::strtoll(f.c_str(), &end, 10);
    if (f.empty() || *end != '\0' || errno != 0 || offsets[i] < 0) {
      return ReplyError(
          res, InvalidArgument(std::string(kNames[i]) + ": '" + Clip(f) + "' is not " +
                               (i == 0 ? "an offset" : "a start time")));
    }
  }
  const int64_t from = offsets[0];
  const Time run = offsets[1];
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  // ?observe=1 (sattach): read beside the step's srun, taking nothing from it.
  const bool observe = req.has_param("observe") && req.get_param_value("observe") == "1";
  Result<api::StepOutput> out =
      c_->steps().ReadStepOutput(id, step, from, *who, observe, run);
  if (!out.ok()) return ReplyError(res, out.status());
  const int wait_ms = IntParam(req, "wait_ms", 10000, 0, 60000);
  if (out->chunks.empty() && !out->done && out->lost == 0 && !poll.expired() &&
      !c_->stopping() && wait_ms > 0) {
    return poll.WaitFor(StepTopic(id, step),
                        poll.started() + std::chrono::milliseconds(wait_ms));
  }
  Reply(res, 200, api::StepOutputToJson(*out));
}

void StepHandlers::StepAction(const Request& req, Response& res,
                              const StepAct& act) const {
  Result<std::pair<state::JobId, int>> id = StepIdOf(req);
  if (!id.ok()) return ReplyError(res, id.status());
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Status st = act(id->first, id->second, *who, req);
  if (!st.ok()) return ReplyError(res, st);
  ReplyOk(res);
}

// A --pty step's keystrokes and window size: {"data": ..., "rows", "cols"}.
void StepHandlers::StepInput(const Request& req, Response& res) const {
  StepAction(req, res,
             [this](state::JobId id, int step, const Caller& who, const Request& r) {
               Result<api::StepInput> in = api::StepInputRequestFromJson(r.body);
               if (!in.ok()) return in.status();
               return c_->steps().StepInput(id, step, *in, who);
             });
}

// {"signal": "INT" or 2} to the step's tasks.
void StepHandlers::SignalStep(const Request& req, Response& res) const {
  StepAction(req, res,
             [this](state::JobId id, int step, const Caller& who, const Request& r) {
               Result<api::SignalRequest> s = api::SignalRequestFromJson(r.body);
               if (!s.ok()) return s.status();
               return c_->steps().SignalStep(id, step, s->signal, false, who);
             });
}

// Stops the step's tasks: SIGTERM, the grace, SIGKILL.
void StepHandlers::CancelStep(const Request& req, Response& res) const {
  StepAction(req, res,
             [this](state::JobId id, int step, const Caller& who, const Request&) {
               return c_->steps().SignalStep(id, step, 0, true, who);
             });
}

}  // namespace hachi::server
