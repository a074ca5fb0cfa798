// The jobs' handlers (server/http_handlers.h; docs/api.md, "Jobs").
#include <chrono>
#include <nlohmann/json.hpp>

#include "api/protocol_json.h"
#include "api/record_json.h"
#include "api/record_json_nlohmann.h"
#include "core/strings.h"
#include "report/job_stats.h"
#include "server/http_auth.h"
#include "server/http_handlers.h"
#include "state/usage_json.h"

namespace hachi::server {

using nlohmann::json;

void JobHandlers::SubmitJob(const Request& req, Response& res) const {
  Result<api::SubmitRequest> r = api::SubmitRequestFromJson(req.body);
  if (!r.ok()) return ReplyError(res, r.status());
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Result<std::vector<state::JobId>> ids = c_->jobs().Submit(*r, *who);
  if (!ids.ok()) return ReplyError(res, ids.status());
  Reply(res, 201, json{{"job_ids", *ids}}.dump());
}

// sbatch --test-only: a submit's checks and where and when it would start; nothing is
// stored.
void JobHandlers::TestSubmit(const Request& req, Response& res) const {
  Result<api::SubmitRequest> r = api::SubmitRequestFromJson(req.body);
  if (!r.ok()) return ReplyError(res, r.status());
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Result<JobService::TestSubmitAnswer> a = c_->jobs().TestSubmit(*r, *who);
  if (!a.ok()) return ReplyError(res, a.status());
  Reply(res, 200,
        json{{"job_id", a->job_id},
             {"known", a->known},
             {"start", a->start},
             {"nodes", a->nodes},
             {"cpus", a->cpus},
             {"partition", a->partition}}
            .dump());
}

namespace {

// What a listing's record keeps of a job's arguments: the tasks of an array share one
// argv, but a listing repeats it for each (10,000 tasks of 1 MB were 10 GB of JSON).
constexpr size_t kBriefArgvBytes = 1024;

// A listing's record (GET /jobs?brief=1): the environment dropped, a batch script
// replaced by one line saying there is one (GET /jobs/ID has it), so that a display can
// still tell a batch job from a command, and the arguments past kBriefArgvBytes by one
// saying how many there were.
void Brief(state::JobRecord* job) {
  state::JobSpec& spec = job->spec;
  const std::vector<std::string>& all = spec.argv();
  size_t kept = 0, bytes = 0;
  while (kept < all.size() && bytes + all[kept].size() + 1 <= kBriefArgvBytes) {
    bytes += all[kept++].size() + 1;
  }
  if (spec.env().empty() && spec.script().empty() && kept == all.size()) return;
  std::vector<std::string> argv(all.begin(),
                                all.begin() + static_cast<std::ptrdiff_t>(kept));
  if (kept < all.size()) {
    const size_t left = all.size() - kept;
    argv.push_back("(" + std::to_string(left) + (left == 1 ? " argument" : " arguments") +
                   " not listed: GET /api/v1/jobs/ID has them)");
  }
  spec.SetPayload({.script = spec.script().empty()
                                 ? ""
                                 : "# not listed: GET /api/v1/jobs/ID has the script\n",
                   .env = {},
                   .argv = std::move(argv)});
}

}  // namespace

void JobHandlers::ListJobs(const Request& req, Response& res) const {
  const bool all = req.has_param("all") && req.get_param_value("all") != "0";
  // A page: ids above ?after=, at most ?limit= (docs/api.md); "next_after" says where
  // the next page starts while there may be more.
  Result<int64_t> after = NonNegativeParam(req, "after", 0, int64_t{1} << 62);
  if (!after.ok()) return ReplyError(res, after.status());
  Result<int64_t> limit = NonNegativeParam(req, "limit", 0, 100000);
  if (!limit.ok()) return ReplyError(res, limit.status());
  std::vector<state::JobRecord> page =
      c_->job_views().Jobs(all, *after, static_cast<size_t>(*limit));
  // Everyone sees every job; only its owner and admins its environment and script.
  const Result<Caller> who = CallerOf(req, *c_);
  const Authorizer& authorizer = c_->authorizer();
  json jobs = json::array();
  // ?brief=1 (the CLI's listings): no environment, and a batch script only as a line
  // that says there is one -- a listing of a thousand jobs was mostly environments, the
  // server's and client's CPU mostly spent on them (docs/benchmarks.md).
  const bool brief = req.has_param("brief") && req.get_param_value("brief") != "0";
  for (state::JobRecord& r : page) {
    if (!who.ok() || !authorizer.Allows(*who, Action::kSeeJobDetails, Resource::Job(r)))
      RedactJobDetails(&r);
    if (brief) Brief(&r);
    jobs.push_back(api::ToJson(r));
  }
  json j{{"jobs", std::move(jobs)}};
  if (*limit > 0 && static_cast<int64_t>(page.size()) == *limit) {
    j["next_after"] = page.back().id;
  }
  Reply(res, 200, j.dump());
}

// ?wait_from=STATE&wait_ms=N: a long poll (`hachi run`), answered once the job's state
// is not STATE, or after N ms; it waits parked on "job/ID", holding no thread.
void JobHandlers::GetJob(const Request& req, Response& res, LongPoll& poll) const {
  Result<state::JobId> id = JobIdOf(req);
  if (!id.ok()) return ReplyError(res, id.status());
  Result<state::JobRecord> job = c_->job_views().Job(*id);
  if (job.ok() && req.has_param("wait_from")) {
    state::JobState known;
    if (!state::ParseJobState(req.get_param_value("wait_from"), &known)) {
      return ReplyError(res,
                        InvalidArgument("wait_from: unknown job state '" +
                                        Clip(req.get_param_value("wait_from")) + "'"));
    }
    const int wait_ms = IntParam(req, "wait_ms", 10000, 0, 60000);
    if (job->state == known && !poll.expired() && !c_->stopping() && wait_ms > 0) {
      return poll.WaitFor(JobTopic(*id),
                          poll.started() + std::chrono::milliseconds(wait_ms));
    }
  }
  if (!job.ok()) return ReplyError(res, job.status());
  const Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok() ||
      !c_->authorizer().Allows(*who, Action::kSeeJobDetails, Resource::Job(*job))) {
    RedactJobDetails(&*job);
  }
  json j{{"job", api::ToJson(*job)}};
  if (std::optional<PendingInfo> info = c_->job_views().Pending(*id))
    j["diagnosis"] = info->diagnosis;
  // docs/api.md, "Explain". Not on long polls (`hachi run` waiting for its job): at
  // 100k pending jobs an explanation holds the lock ~30 ms, and nobody reads it there.
  if (!req.has_param("wait_from")) {
    if (Result<report::JobExplain> e = c_->job_views().Explain(*id); e.ok()) {
      j["explain"] = json::parse(report::JobExplainToJson(*e));
    }
  }
  Reply(res, 200, j.dump());
}

void JobHandlers::JobAction(const Request& req, Response& res, const JobAct& act) const {
  Result<state::JobId> id = JobIdOf(req);
  if (!id.ok()) return ReplyError(res, id.status());
  int task = -1;
  if (req.matches.size() > 2 && req.matches[2].matched) {
    const std::string t = req.matches[2];
    if (t.size() > 9)
      return ReplyError(res,
                        InvalidArgument("array task '" + Clip(t) + "' is too large"));
    task = std::stoi(t);
  }
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Status st = act(*id, task, *who, req.body);
  if (!st.ok()) return ReplyError(res, st);
  ReplyOk(res);
}

void JobHandlers::CancelJob(const Request& req, Response& res) const {
  JobAction(req, res,
            [this](state::JobId id, int task, const Caller& who, const std::string&) {
              return c_->jobs().Cancel(id, who, task);
            });
}

void JobHandlers::HoldJob(const Request& req, Response& res) const {
  JobAction(
      req, res,
      [this](state::JobId id, int task, const Caller& who, const std::string& body) {
        Result<api::HoldRequest> r = api::HoldRequestFromJson(body);
        if (!r.ok()) return r.status();
        return c_->jobs().Hold(id, true, who, task, r->user);
      });
}

void JobHandlers::ReleaseJob(const Request& req, Response& res) const {
  JobAction(req, res,
            [this](state::JobId id, int task, const Caller& who, const std::string&) {
              return c_->jobs().Hold(id, false, who, task);
            });
}

// scancel --signal: {"signal", "scope"?} (api::SignalRequest).
void JobHandlers::SignalJob(const Request& req, Response& res) const {
  JobAction(
      req, res,
      [this](state::JobId id, int task, const Caller& who, const std::string& body) {
        Result<api::SignalRequest> r = api::SignalRequestFromJson(body);
        if (!r.ok()) return r.status();
        return c_->jobs().Signal(id, r->signal, r->scope, who, task);
      });
}

// scontrol requeue.
void JobHandlers::RequeueJob(const Request& req, Response& res) const {
  JobAction(req, res,
            [this](state::JobId id, int task, const Caller& who, const std::string&) {
              return c_->jobs().Requeue(id, who, task);
            });
}

// scontrol update: the fields of api::JobUpdate.
void JobHandlers::UpdateJob(const Request& req, Response& res) const {
  JobAction(
      req, res,
      [this](state::JobId id, int task, const Caller& who, const std::string& body) {
        Result<api::JobUpdate> u = api::JobUpdateFromJson(body);
        if (!u.ok()) return u.status();
        return c_->jobs().Update(id, *u, who, task);
      });
}

// salloc's end: {"exit_code": N}.
void JobHandlers::CompleteAllocation(const Request& req, Response& res) const {
  JobAction(
      req, res, [this](state::JobId id, int, const Caller& who, const std::string& body) {
        const json j = json::parse(body.empty() ? "{}" : body, nullptr, false);
        if (!j.is_object() ||
            (j.contains("exit_code") && !j["exit_code"].is_number_integer())) {
          return InvalidArgument("complete: expected {\"exit_code\": an integer 0..255}");
        }
        const int64_t code = j.value("exit_code", int64_t{0});
        if (code < 0 || code > 255) {
          return InvalidArgument("complete: exit_code " + std::to_string(code) +
                                 " is not 0..255");
        }
        return c_->steps().CompleteAllocation(id, static_cast<int>(code), who);
      });
}

// docs/api.md, "Job usage": what the job's runs did with their GPUs, CPUs and memory,
// and what `hachi eff` says of the latest run. The job's owner or an operator (job
// details).
void JobHandlers::JobUsage(const Request& req, Response& res) const {
  Result<state::JobId> id = JobIdOf(req);
  if (!id.ok()) return ReplyError(res, id.status());
  Result<state::JobRecord> job = c_->job_views().Job(*id);
  if (!job.ok()) return ReplyError(res, job.status());
  const Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  if (!c_->authorizer().Allows(*who, Action::kSeeJobDetails, Resource::Job(*job))) {
    return ReplyError(
        res, PermissionDenied("job " + std::to_string(*id) + "'s usage: not your job"));
  }
  Result<std::vector<state::JobUsage>> runs = c_->job_views().Usage(*id);
  if (!runs.ok()) return ReplyError(res, runs.status());
  json list = json::array();
  for (const state::JobUsage& u : *runs)
    list.push_back(json::parse(state::UsageToJson(u)));
  json findings = json::array();
  if (!runs->empty()) {
    state::FindingInputs in;
    in.gpu_memory_promised_mib = job->req.gpu_memory_mib;
    for (const state::UsageFinding& f : state::Findings(runs->back(), in)) {
      findings.push_back(json{{"kind", f.kind}, {"text", f.text}});
    }
  }
  Reply(res, 200,
        json{{"job", api::ToJson(*job)},
             {"runs", std::move(list)},
             {"findings", std::move(findings)}}
            .dump());
}

}  // namespace hachi::server
