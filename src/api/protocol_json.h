// JSON codecs of the API messages (protocol.h) and the error envelope
// {"error": {"code": "invalid_argument", "message": "..."}}. Decoding is strict like the
// record codecs: wrong types and unknown fields are errors naming the field, and the
// request decoders also apply api/request_limits.h (sizes and ranges), so a body they
// accept is one the server may act on. Encoders never throw: bytes that are not UTF-8
// become U+FFFD. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "api/protocol.h"
#include "core/status.h"

namespace hachi::api {

std::string SubmitRequestToJson(const SubmitRequest& r);
Result<SubmitRequest> SubmitRequestFromJson(std::string_view text);

std::string AgentHealthToJson(const AgentHealth& h);
Result<AgentHealth> AgentHealthFromJson(std::string_view text);
std::string AgentRegistrationToJson(const AgentRegistration& r);
Result<AgentRegistration> AgentRegistrationFromJson(std::string_view text);

std::string AgentWorkToJson(const AgentWork& w);
Result<AgentWork> AgentWorkFromJson(std::string_view text);

// Burn-in (burn_in_json.cc).
std::string BurnInReportToJson(const BurnInReport& r);
Result<BurnInReport> BurnInReportFromJson(std::string_view text);

std::string JobExitsToJson(const std::vector<api::JobExit>& exits);
Result<std::vector<api::JobExit>> JobExitsFromJson(std::string_view text);

// Job steps (docs/api.md "Steps"): POST /jobs/ID/steps's body, the agents'
// POST /agents/NODE/steps and its reply, GET /jobs/ID/steps/S/output's reply.
std::string StepRequestToJson(const StepRequest& r);
Result<StepRequest> StepRequestFromJson(std::string_view text);
std::string StepReportsToJson(const StepReports& r);
Result<StepReports> StepReportsFromJson(std::string_view text);
std::string StepAcksToJson(const std::vector<StepAck>& acks);
Result<std::vector<StepAck>> StepAcksFromJson(std::string_view text);
std::string StepOutputToJson(const StepOutput& o);
Result<StepOutput> StepOutputFromJson(std::string_view text);
// POST /jobs/ID/steps/N/input: {"data": bytes, "rows", "cols"} (the key from the path).
std::string StepInputRequestToJson(const StepInput& in);
Result<StepInput> StepInputRequestFromJson(std::string_view text);

// POST /jobs/ID/signal: {"signal": "USR1" or 10, "batch_only": false}; a bad
// signal is kInvalidArgument naming it.
std::string SignalRequestToJson(const SignalRequest& r);
Result<SignalRequest> SignalRequestFromJson(std::string_view text);
std::string HoldRequestToJson(const HoldRequest& r);
Result<HoldRequest> HoldRequestFromJson(std::string_view text);  // "" is {}

// POST /jobs/ID/update. FromJson checks the shape and the keys ("req"'s
// among the request's fields, never "user"); the values are checked by
// ApplyRequestPatch, which merges `patch` into `*req` (unchanged on error: a field of
// the wrong type is kInvalidArgument naming it, as "update.req.gpus: ...").
std::string JobUpdateToJson(const JobUpdate& u);
Result<JobUpdate> JobUpdateFromJson(std::string_view text);
Status ApplyRequestPatch(std::string_view patch, sched::JobRequest* req);

// POST /nodes/NAME/drain: "" or {"reason": "..."} -> the reason ("" for none).
Result<std::string> DrainReasonFromJson(std::string_view text);
// POST /nodes/NAME/resume: "", {} or {"gpu": N} -> N, or -1 for the whole node.
Result<int> ResumeGpuFromJson(std::string_view text);

// The error envelope, and the HTTP status for a code (400, 404, 409, 422, 503, 500).
std::string ErrorToJson(const Status& s);
int HttpStatusFor(StatusCode code);
// Turns an error reply back into a Status (the message from the envelope when there is
// one, else the HTTP status and the body's start).
Status StatusFromError(int http_status, std::string_view body);

std::string_view StatusCodeSlug(StatusCode code);  // "invalid_argument", ...

}  // namespace hachi::api
