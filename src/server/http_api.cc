#include "server/http_api.h"

#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/protocol_json.h"
#include "api/record_json.h"
#include "api/record_json_nlohmann.h"
#include "core/strings.h"
#include "report/gpu_report.h"
#include "report/job_stats.h"
#include "server/http_auth.h"
#include "server/http_loop.h"
#include "server/metrics.h"
#include "state/usage_json.h"

namespace hachi::server {
namespace {

using nlohmann::json;

void Reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void ReplyError(httplib::Response& res, const Status& s) {
  Reply(res, api::HttpStatusFor(s.code()), api::ErrorToJson(s));
}

Result<state::JobId> JobIdOf(const httplib::Request& req) {
  const std::string s = req.matches[1];
  if (s.size() > 18) return InvalidArgument("job id '" + Clip(s) + "' is too large");
  return static_cast<state::JobId>(std::stoll(s));
}

// The job and step of /jobs/ID/steps/N/...: matches 1 and 2.
Result<std::pair<state::JobId, int>> StepIdOf(const httplib::Request& req) {
  Result<state::JobId> id = JobIdOf(req);
  if (!id.ok()) return id.status();
  const std::string step = req.matches[2];
  if (step.size() > 9) return InvalidArgument("step '" + Clip(step) + "' is too large");
  return std::make_pair(*id, std::stoi(step));
}

int IntParam(const httplib::Request& req, const char* name, int fallback, int lo,
             int hi) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') return fallback;
  return static_cast<int>(std::clamp<long>(x, lo, hi));
}

// ?name= as an integer in [0, hi]; `fallback` when absent. Anything else is a 400 that
// names the parameter (a mistyped page size must not silently list everything).
Result<int64_t> NonNegativeParam(const httplib::Request& req, const char* name,
                                 int64_t fallback, int64_t hi) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < 0 || x > hi) {
    return InvalidArgument(std::string("?") + name + "=" + v.substr(0, 40) +
                           ": expected an integer from 0 to " + std::to_string(hi));
  }
  return static_cast<int64_t>(x);
}

json PartitionJson(const sched::Partition& p,
                   const std::vector<state::NodeStatus>& nodes) {
  json names = json::array();
  for (const state::NodeStatus& n : nodes) {
    if (std::find(n.partitions.begin(), n.partitions.end(), p.name) !=
        n.partitions.end()) {
      names.push_back(n.record.name);
    }
  }
  return json{
      {"name", p.name},
      {"mode", p.mode == sched::PartitionMode::kWholeNode ? "whole-node" : "shared"},
      {"nodes", names},
      {"min_gpus", p.min_gpus},
      {"max_gpus", p.max_gpus},
      {"default_time", p.default_time},
      {"max_time", p.max_time},
      {"tier", p.tier},
      {"allow_gpu_sharing", p.allow_gpu_sharing},
      {"allow_cpu_jobs", p.allow_cpu_jobs}};
}

// The connection layer's own figures (docs/metrics.md), after the Controller's.
std::string ConnectionMetrics(const HttpLoopStats& st) {
  using metrics::Type;
  metrics::Writer w;
  auto one = [&w](const char* name, Type type, const char* help, int64_t v) {
    w.Begin(name, help, type);
    w.Sample({}, static_cast<double>(v));
  };
  one("hachi_http_connections", Type::kGauge,
      "Open API connections (TCP and Unix socket).", st.connections);
  one("hachi_http_parked_requests", Type::kGauge,
      "Long polls waiting without a thread (agents' work polls, job waits).", st.parked);
  one("hachi_http_requests_total", Type::kCounter, "Requests read whole and handled.",
      st.requests);
  w.Begin("hachi_http_connections_refused_total",
          "Connections refused at accept, by the bound they passed.", Type::kCounter);
  w.Sample({{"reason", "per_peer"}}, static_cast<double>(st.refused_per_peer));
  w.Sample({{"reason", "limit"}}, static_cast<double>(st.refused_full));
  one("hachi_http_deadlines_missed_total", Type::kCounter,
      "Connections cut at a head, body or write deadline.", st.timed_out);
  one("hachi_http_bodies_too_large_total", Type::kCounter,
      "Requests refused (413) for a body past the limit, before reading it.",
      st.too_large);
  return w.Take();
}

}  // namespace

HttpServer::HttpServer(Controller* controller, HttpOptions options)
    : controller_(controller), options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

std::string HttpServer::url() const {
  return (tls_ ? "https://" : "http://") + host_ + ":" + std::to_string(port_);
}

void HttpServer::Routes(HttpRouter& s) {
  Controller* c = controller_;
  const std::string p = api::kApiPrefix;
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const Status st =
        res.status == 404 ? NotFound("no such endpoint: " + req.method + " " + req.path)
        : res.status == 413
            ? InvalidArgument("request body too large")
            : InvalidArgument("bad request (HTTP " + std::to_string(res.status) + ")");
    res.set_content(api::ErrorToJson(st), "application/json");
  });
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unexpected error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        ReplyError(res, Internal(what));
      });

  // Who is asking, before any handler (server/http_auth.h).
  InstallAuthGate(s, c, options_.auth);
  AddTokenRoutes(s, c);

  s.Get(p + "/health", [](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, R"({"ok":true})");
  });
  // Prometheus scrapes /metrics by default (docs/metrics.md): outside /api/v1, read-only.
  HttpLoop* loop = loop_.get();
  s.Get("/metrics", [c, loop](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(c->MetricsText() + ConnectionMetrics(loop->stats()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });

  // ---- Jobs ----
  s.Post(p + "/jobs", [c](const httplib::Request& req, httplib::Response& res) {
    Result<api::SubmitRequest> r = api::SubmitRequestFromJson(req.body);
    if (!r.ok()) return ReplyError(res, r.status());
    Result<Caller> who = CallerOf(req, *c);
    if (!who.ok()) return ReplyError(res, who.status());
    Result<std::vector<state::JobId>> ids = c->Submit(*r, *who);
    if (!ids.ok()) return ReplyError(res, ids.status());
    Reply(res, 201, json{{"job_ids", *ids}}.dump());
  });
  // sbatch --test-only (issue 17): a submit's checks and where and when it would start;
  // nothing is stored.
  s.Post(p + "/jobs/test", [c](const httplib::Request& req, httplib::Response& res) {
    Result<api::SubmitRequest> r = api::SubmitRequestFromJson(req.body);
    if (!r.ok()) return ReplyError(res, r.status());
    Result<Caller> who = CallerOf(req, *c);
    if (!who.ok()) return ReplyError(res, who.status());
    Result<Controller::TestSubmitAnswer> a = c->TestSubmit(*r, *who);
    if (!a.ok()) return ReplyError(res, a.status());
    Reply(res, 200,
          json{{"job_id", a->job_id},
               {"known", a->known},
               {"start", a->start},
               {"nodes", a->nodes},
               {"cpus", a->cpus},
               {"partition", a->partition}}
              .dump());
  });
  s.Get(p + "/jobs", [c](const httplib::Request& req, httplib::Response& res) {
    const bool all = req.has_param("all") && req.get_param_value("all") != "0";
    // A page: ids above ?after=, at most ?limit= (docs/api.md); "next_after" says where
    // the next page starts while there may be more.
    Result<int64_t> after = NonNegativeParam(req, "after", 0, int64_t{1} << 62);
    if (!after.ok()) return ReplyError(res, after.status());
    Result<int64_t> limit = NonNegativeParam(req, "limit", 0, 100000);
    if (!limit.ok()) return ReplyError(res, limit.status());
    std::vector<state::JobRecord> page =
        c->Jobs(all, *after, static_cast<size_t>(*limit));
    // Everyone sees every job; only its owner and admins its environment and script.
    const Result<Caller> who = CallerOf(req, *c);
    const Authorizer& authorizer = c->authorizer();
    json jobs = json::array();
    for (state::JobRecord& r : page) {
      if (!who.ok() || !authorizer.Allows(*who, Action::kSeeJobDetails, Resource::Job(r)))
        RedactJobDetails(&r);
      jobs.push_back(api::ToJson(r));
    }
    json j{{"jobs", std::move(jobs)}};
    if (*limit > 0 && static_cast<int64_t>(page.size()) == *limit) {
      j["next_after"] = page.back().id;
    }
    Reply(res, 200, j.dump());
  });
  // ?wait_from=STATE&wait_ms=N: a long poll (`hachi run`), answered once the job's state
  // is not STATE, or after N ms; it waits parked on "job/ID", holding no thread.
  s.GetPoll(p + R"(/jobs/(\d+))", [c](const httplib::Request& req, httplib::Response& res,
                                      LongPoll& poll) {
    Result<state::JobId> id = JobIdOf(req);
    if (!id.ok()) return ReplyError(res, id.status());
    Result<state::JobRecord> job = c->Job(*id);
    if (job.ok() && req.has_param("wait_from")) {
      state::JobState known;
      if (!state::ParseJobState(req.get_param_value("wait_from"), &known)) {
        return ReplyError(res,
                          InvalidArgument("wait_from: unknown job state '" +
                                          Clip(req.get_param_value("wait_from")) + "'"));
      }
      const int wait_ms = IntParam(req, "wait_ms", 10000, 0, 60000);
      if (job->state == known && !poll.expired() && !c->stopping() && wait_ms > 0) {
        return poll.WaitFor(JobTopic(*id),
                            poll.started() + std::chrono::milliseconds(wait_ms));
      }
    }
    if (!job.ok()) return ReplyError(res, job.status());
    const Result<Caller> who = CallerOf(req, *c);
    if (!who.ok() ||
        !c->authorizer().Allows(*who, Action::kSeeJobDetails, Resource::Job(*job))) {
      RedactJobDetails(&*job);
    }
    json j{{"job", api::ToJson(*job)}};
    if (std::optional<PendingInfo> info = c->Pending(*id))
      j["diagnosis"] = info->diagnosis;
    // docs/api.md, "Explain". Not on long polls (`hachi run` waiting for its job): at
    // 100k pending jobs an explanation holds the lock ~30 ms, and nobody reads it there.
    if (!req.has_param("wait_from")) {
      if (Result<report::JobExplain> e = c->Explain(*id); e.ok()) {
        j["explain"] = json::parse(report::JobExplainToJson(*e));
      }
    }
    Reply(res, 200, j.dump());
  });
  // POST /jobs/ID/ACTION and /jobs/A_T/ACTION: the job, the array task ("A_T", Slurm's;
  // -1 for A alone, the whole array) and who asks, then `act` with the request's body.
  // Every job action's handler is one of these.
  using JobAct =
      std::function<Status(state::JobId, int, const Caller&, const std::string&)>;
  auto job_action = [c](JobAct act) {
    return [c, act](const httplib::Request& req, httplib::Response& res) {
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
      Result<Caller> who = CallerOf(req, *c);
      if (!who.ok()) return ReplyError(res, who.status());
      Status st = act(*id, task, *who, req.body);
      if (!st.ok()) return ReplyError(res, st);
      Reply(res, 200, json{{"ok", true}}.dump());
    };
  };
  auto cancel = job_action([c](state::JobId id, int task, const Caller& who,
                               const std::string&) { return c->Cancel(id, who, task); });
  // ID, or A_T for one task of array A (docs/api.md, "Arrays").
  s.Post(p + R"(/jobs/(\d+)(?:_(\d+))?/cancel)", cancel);
  s.Delete(p + R"(/jobs/(\d+)(?:_(\d+))?)", cancel);
  s.Post(p + R"(/jobs/(\d+)(?:_(\d+))?/hold)",
         job_action([c](state::JobId id, int task, const Caller& who,
                        const std::string&) { return c->Hold(id, true, who, task); }));
  s.Post(p + R"(/jobs/(\d+)(?:_(\d+))?/release)",
         job_action([c](state::JobId id, int task, const Caller& who,
                        const std::string&) { return c->Hold(id, false, who, task); }));
  // Issue 17: scancel --signal, scontrol requeue and scontrol update (docs/api.md).
  s.Post(p + R"(/jobs/(\d+)(?:_(\d+))?/signal)",
         job_action(
             [c](state::JobId id, int task, const Caller& who, const std::string& body) {
               Result<api::SignalRequest> r = api::SignalRequestFromJson(body);
               if (!r.ok()) return r.status();
               return c->Signal(id, r->signal, r->batch_only, who, task);
             }));
  s.Post(p + R"(/jobs/(\d+)(?:_(\d+))?/requeue)",
         job_action([c](state::JobId id, int task, const Caller& who,
                        const std::string&) { return c->Requeue(id, who, task); }));
  s.Post(p + R"(/jobs/(\d+)(?:_(\d+))?/update)",
         job_action(
             [c](state::JobId id, int task, const Caller& who, const std::string& body) {
               Result<api::JobUpdate> u = api::JobUpdateFromJson(body);
               if (!u.ok()) return u.status();
               return c->Update(id, *u, who, task);
             }));

  // salloc's end: {"exit_code": N} (issue 18).
  s.Post(
      p + R"(/jobs/(\d+)/complete)",
      job_action([c](state::JobId id, int, const Caller& who, const std::string& body) {
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
        return c->CompleteAllocation(id, static_cast<int>(code), who);
      }));
  // ---- Job steps (issue 18; docs/api.md "Steps") ----
  s.Post(p + R"(/jobs/(\d+)/steps)",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<state::JobId> id = JobIdOf(req);
           if (!id.ok()) return ReplyError(res, id.status());
           Result<Caller> who = CallerOf(req, *c);
           if (!who.ok()) return ReplyError(res, who.status());
           Result<api::StepRequest> r = api::StepRequestFromJson(req.body);
           if (!r.ok()) return ReplyError(res, r.status());
           Result<state::StepRecord> step = c->CreateStep(*id, *r, *who);
           if (!step.ok()) return ReplyError(res, step.status());
           Reply(res, 200, "{\"step\":" + api::StepRecordToJson(*step) + "}");
         });
  s.Get(p + R"(/jobs/(\d+)/steps)",
        [c](const httplib::Request& req, httplib::Response& res) {
          Result<state::JobId> id = JobIdOf(req);
          if (!id.ok()) return ReplyError(res, id.status());
          if (Result<state::JobRecord> job = c->Job(*id); !job.ok()) {
            return ReplyError(res, job.status());
          }
          Reply(res, 200, api::StepRecordsToJson(c->Steps(*id)));
        });
  // Issue 21 (docs/api.md, "Job usage"): what the job's runs did with their GPUs, CPUs
  // and memory, and what `hachi eff` says of the latest run. The job's owner or an
  // operator (job details).
  s.Get(p + R"(/jobs/(\d+)/usage)", [c](const httplib::Request& req,
                                        httplib::Response& res) {
    Result<state::JobId> id = JobIdOf(req);
    if (!id.ok()) return ReplyError(res, id.status());
    Result<state::JobRecord> job = c->Job(*id);
    if (!job.ok()) return ReplyError(res, job.status());
    const Result<Caller> who = CallerOf(req, *c);
    if (!who.ok()) return ReplyError(res, who.status());
    if (!c->authorizer().Allows(*who, Action::kSeeJobDetails, Resource::Job(*job))) {
      return ReplyError(
          res, PermissionDenied("job " + std::to_string(*id) + "'s usage: not your job"));
    }
    Result<std::vector<state::JobUsage>> runs = c->Usage(*id);
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
  });
  // Every job's steps (sacct).
  s.Get(p + "/steps", [c](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, api::StepRecordsToJson(c->Steps(0)));
  });
  // ?from=OFFSET&wait_ms=N: srun's long poll for its step's output, parked on
  // "step/ID.S" until an agent's report brings some, the step ends, or N ms pass.
  s.GetPoll(p + R"(/jobs/(\d+)/steps/(\d+)/output)",
            [c](const httplib::Request& req, httplib::Response& res, LongPoll& poll) {
              Result<std::pair<state::JobId, int>> key = StepIdOf(req);
              if (!key.ok()) return ReplyError(res, key.status());
              const state::JobId id = key->first;
              const int step = key->second;
              int64_t from = 0;
              if (req.has_param("from")) {
                const std::string f = req.get_param_value("from");
                char* end = nullptr;
                errno = 0;
                from = std::strtoll(f.c_str(), &end, 10);
                if (f.empty() || *end != '\0' || errno != 0 || from < 0) {
                  return ReplyError(
                      res, InvalidArgument("from: '" + Clip(f) + "' is not an offset"));
                }
              }
              Result<Caller> who = CallerOf(req, *c);
              if (!who.ok()) return ReplyError(res, who.status());
              Result<api::StepOutput> out = c->ReadStepOutput(id, step, from, *who);
              if (!out.ok()) return ReplyError(res, out.status());
              const int wait_ms = IntParam(req, "wait_ms", 10000, 0, 60000);
              if (out->chunks.empty() && !out->done && out->lost == 0 &&
                  !poll.expired() && !c->stopping() && wait_ms > 0) {
                return poll.WaitFor(StepTopic(id, step),
                                    poll.started() + std::chrono::milliseconds(wait_ms));
              }
              Reply(res, 200, api::StepOutputToJson(*out));
            });
  // POST /jobs/ID/steps/N/ACTION: the job, the step and who asks, then `act` with the
  // request's body.
  using StepAct =
      std::function<Status(state::JobId, int, const Caller&, const httplib::Request&)>;
  auto step_action = [c](StepAct act) {
    return [c, act](const httplib::Request& req, httplib::Response& res) {
      Result<std::pair<state::JobId, int>> id = StepIdOf(req);
      if (!id.ok()) return ReplyError(res, id.status());
      Result<Caller> who = CallerOf(req, *c);
      if (!who.ok()) return ReplyError(res, who.status());
      Status st = act(id->first, id->second, *who, req);
      if (!st.ok()) return ReplyError(res, st);
      Reply(res, 200, json{{"ok", true}}.dump());
    };
  };
  // A --pty step's keystrokes and window size: {"data": ..., "rows", "cols"}.
  s.Post(p + R"(/jobs/(\d+)/steps/(\d+)/input)",
         step_action([c](state::JobId id, int step, const Caller& who,
                         const httplib::Request& req) {
           Result<api::StepInput> in = api::StepInputRequestFromJson(req.body);
           if (!in.ok()) return in.status();
           return c->StepInput(id, step, *in, who);
         }));
  // {"signal": "INT" or 2} to the step's tasks; /cancel stops them (SIGTERM, grace,
  // SIGKILL).
  s.Post(p + R"(/jobs/(\d+)/steps/(\d+)/(signal|cancel))",
         step_action([c](state::JobId id, int step, const Caller& who,
                         const httplib::Request& req) {
           if (req.matches[3] == "cancel") return c->SignalStep(id, step, 0, true, who);
           Result<api::SignalRequest> r = api::SignalRequestFromJson(req.body);
           if (!r.ok()) return r.status();
           return c->SignalStep(id, step, r->signal, false, who);
         }));

  // ---- Nodes, partitions ----
  // Stray processes' arguments are the admins' to see (RedactStrayProcesses).
  auto nodes_for = [c](const httplib::Request& req) {
    std::vector<state::NodeStatus> nodes = c->Nodes();
    const Result<Caller> who = CallerOf(req, *c);
    if (!who.ok() || !who->admin) {
      for (state::NodeStatus& n : nodes) RedactStrayProcesses(&n);
    }
    return nodes;
  };
  s.Get(p + "/nodes", [nodes_for](const httplib::Request& req, httplib::Response& res) {
    json nodes = json::array();
    for (const state::NodeStatus& n : nodes_for(req)) nodes.push_back(api::ToJson(n));
    Reply(res, 200, json{{"nodes", nodes}}.dump());
  });
  s.Get(p + R"(/nodes/([^/]+))",
        [nodes_for](const httplib::Request& req, httplib::Response& res) {
          const std::string name = req.matches[1];
          for (const state::NodeStatus& n : nodes_for(req)) {
            if (n.record.name == name)
              return Reply(res, 200, json{{"node", api::ToJson(n)}}.dump());
          }
          ReplyError(res, NotFound("no node " + name));
        });
  s.Post(p + R"(/nodes/([^/]+)/(drain|resume))",
         [c](const httplib::Request& req, httplib::Response& res) {
           const std::string name = req.matches[1];
           Result<Caller> who = CallerOf(req, *c);
           if (!who.ok()) return ReplyError(res, who.status());
           Status st;
           if (req.matches[2] == "drain") {
             Result<std::string> reason = api::DrainReasonFromJson(req.body);
             if (!reason.ok()) return ReplyError(res, reason.status());
             st = c->Drain(name, *reason, *who);
           } else {
             // {"gpu": N}: only that unhealthy GPU returns to service.
             Result<int> gpu = api::ResumeGpuFromJson(req.body);
             if (!gpu.ok()) return ReplyError(res, gpu.status());
             st = c->Resume(name, *gpu, *who);
           }
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}}.dump());
         });
  s.Get(p + "/partitions", [c](const httplib::Request&, httplib::Response& res) {
    const std::vector<state::NodeStatus> nodes = c->Nodes();
    json parts = json::array();
    for (const sched::Partition& part : c->Partitions()) {
      parts.push_back(PartitionJson(part, nodes));
    }
    Reply(res, 200, json{{"partitions", parts}, {"warnings", c->Warnings()}}.dump());
  });

  s.Get(p + "/stats", [c](const httplib::Request& req, httplib::Response& res) {
    // Queue waits per partition and GPU count over ?window=SECONDS (default a day);
    // a partition whose median wait passes ?alert=SECONDS (default 20 min) is flagged.
    const int window = IntParam(req, "window", 86400, 60, 90 * 86400);
    const int alert = IntParam(req, "alert", 1200, 1, 90 * 86400);
    int gpus = 0;
    for (const state::NodeStatus& n : c->Nodes()) gpus += n.gpus;
    report::JobStats stats =
        report::ComputeStats(c->Jobs(true), c->clock().Now(), window, alert, gpus);
    report::AttachLoads(&stats,
                        c->PartitionLoads());  // a flagged partition's likely cause
    json j = json::parse(report::JobStatsToJson(stats));
    const ControllerStats cs = c->stats();
    j["scheduler"] = {{"cycles", cs.cycles},
                      {"last_cycle_ms", cs.last_cycle_ms},
                      {"max_cycle_ms", cs.max_cycle_ms},
                      {"starts", cs.starts},
                      {"submits", cs.submits}};
    Reply(res, 200, j.dump());
  });

  // GPU-hours allocated and used over ?from=&to= (Unix seconds; default the last 7 days
  // to now) per ?by= account|user|partition|nodegroup, and the ?top= (default 10) jobs
  // that held the most idle GPU-hours (issue 21, docs/api.md "Report"). Whoever may
  // list the jobs may see it: it names accounts and users as the job list does.
  s.Get(p + "/report", [c](const httplib::Request& req, httplib::Response& res) {
    constexpr int64_t kMaxTime = int64_t{1} << 40;
    const Time now = c->clock().Now();
    Result<int64_t> to = NonNegativeParam(req, "to", now, kMaxTime);
    if (!to.ok()) return ReplyError(res, to.status());
    Result<int64_t> from =
        NonNegativeParam(req, "from", std::max<int64_t>(0, *to - 7 * 86400), kMaxTime);
    if (!from.ok()) return ReplyError(res, from.status());
    if (*from >= *to) {
      return ReplyError(res,
                        InvalidArgument("?from=" + std::to_string(*from) +
                                        ": must be before ?to=" + std::to_string(*to)));
    }
    Result<int64_t> top = NonNegativeParam(req, "top", 10, 1000);
    if (!top.ok()) return ReplyError(res, top.status());
    report::ReportQuery q;
    q.from = *from;
    q.to = *to;
    q.top = static_cast<int>(*top);
    if (req.has_param("by") && !report::ParseReportBy(req.get_param_value("by"), &q.by)) {
      return ReplyError(res, InvalidArgument("?by=" + Clip(req.get_param_value("by")) +
                                             ": expected account, user, partition "
                                             "or nodegroup"));
    }
    Reply(res, 200, report::GpuReportToJson(c->GpuHours(q)));
  });

  // ---- Agents ----
  s.Post(p + "/agents/register",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<api::AgentRegistration> r = api::AgentRegistrationFromJson(req.body);
           if (!r.ok()) return ReplyError(res, r.status());
           Status st = c->Register(*r, req.remote_addr);
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}, {"lease_s", c->lease()}}.dump());
         });
  // The agent's long poll (and heartbeat): work now, or parked on "agent/NODE" until the
  // AgentHub has some for it (Launch, Cancel, Close notify) or wait_ms passed.
  s.GetPoll(p + R"(/agents/([^/]+)/work)", [c](const httplib::Request& req,
                                               httplib::Response& res, LongPoll& poll) {
    const std::string node = req.matches[1];
    const api::AgentWork w = c->Poll(node, 0);
    const int wait_ms = IntParam(req, "wait_ms", 10000, 0, 60000);
    if (w.Empty() && !w.reregister && !poll.expired() && !c->stopping() && wait_ms > 0) {
      return poll.WaitFor(AgentTopic(node),
                          poll.started() + std::chrono::milliseconds(wait_ms));
    }
    Reply(res, 200, api::AgentWorkToJson(w));
  });
  s.Post(p + R"(/agents/([^/]+)/health)",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<api::AgentHealth> h = api::AgentHealthFromJson(req.body);
           if (!h.ok()) return ReplyError(res, h.status());
           Status st = c->ReportHealth(req.matches[1], *h);
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}}.dump());
         });
  // Issue 19: a burn-in run's result (docs/burn-in.md).
  s.Post(p + R"(/agents/([^/]+)/burn-in)",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<api::BurnInReport> r = api::BurnInReportFromJson(req.body);
           if (!r.ok()) return ReplyError(res, r.status());
           Status st = c->burn_in().Report(req.matches[1], *r);
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}}.dump());
         });
  s.Post(p + R"(/agents/([^/]+)/steps)",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<api::StepReports> r = api::StepReportsFromJson(req.body);
           if (!r.ok()) return ReplyError(res, r.status());
           Result<std::vector<api::StepAck>> acks = c->ReportSteps(req.matches[1], *r);
           if (!acks.ok()) return ReplyError(res, acks.status());
           Reply(res, 200, api::StepAcksToJson(*acks));
         });
  s.Post(p + R"(/agents/([^/]+)/exits)",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<std::vector<api::JobExit>> exits = api::JobExitsFromJson(req.body);
           if (!exits.ok()) return ReplyError(res, exits.status());
           Status st = c->ReportExits(req.matches[1], *exits);
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}}.dump());
         });
  AddDashboardRoutes(s, c, options_.dashboard);  // the dashboard and its data (web.h)
}

Status HttpServer::Start() {
  if (started_) return Status::Ok();
  HttpLoopOptions lo = options_.connections;
  lo.max_body_bytes = options_.max_body_bytes;
  lo.workers = options_.threads;
  router_ = std::make_unique<HttpRouter>();
  loop_ = std::make_unique<HttpLoop>(router_.get(), lo);
  Routes(*router_);
  if (!options_.listen.empty()) {
    const size_t colon = options_.listen.rfind(':');
    if (colon == std::string::npos) {
      return InvalidArgument("--listen '" + options_.listen + "': expected HOST:PORT");
    }
    host_ = options_.listen.substr(0, colon);
    const std::string port_text = options_.listen.substr(colon + 1);
    char* end = nullptr;
    const long want = std::strtol(port_text.c_str(), &end, 10);
    if (port_text.empty() || *end != '\0' || want < 0 || want > 65535) {
      return InvalidArgument("--listen '" + options_.listen +
                             "': the port must be a number from 0 to 65535");
    }
    if (options_.tls_cert.empty() != options_.tls_key.empty()) {
      return InvalidArgument("--tls-cert and --tls-key go together");
    }
    if (!options_.tls_cert.empty()) {
      HACHI_RETURN_IF_ERROR(loop_->UseTls(options_.tls_cert, options_.tls_key));
      tls_ = true;
    }
    // [::1] style hosts: getaddrinfo wants the address without brackets.
    std::string host = host_;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    Result<int> port = loop_->ListenTcp(host, static_cast<int>(want));
    if (!port.ok()) return port.status();
    port_ = *port;
  }
  if (!options_.unix_socket.empty()) {
    HACHI_RETURN_IF_ERROR(loop_->ListenUnix(options_.unix_socket));
  }
  HACHI_RETURN_IF_ERROR(loop_->Start());
  HttpLoop* loop = loop_.get();
  controller_->SetNotifier([loop](const std::string& topic) { loop->Notify(topic); });
  started_ = true;
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!loop_) return;
  if (started_) controller_->SetNotifier(nullptr);
  loop_->Stop();
}

HttpLoopStats HttpServer::connection_stats() const {
  return loop_ ? loop_->stats() : HttpLoopStats{};
}

}  // namespace hachi::server
