// Sane sizes and ranges for what clients send the server (docs/api.md, "Limits"). The
// record codecs (api/record_json.h) check form: types, field names, each integer
// within its C++ type. These check that a request from outside could mean something:
// no negative counts, no 10^9 GPUs, no megabyte job names, no NUL bytes in what
// becomes an argv or a path. The decoders of api/protocol_json.h call them, so every
// request body the server accepts has passed them; the scheduler's own validation
// (sched::ValidateRequest: does it fit this cluster?) comes after.
//
// Errors are kInvalidArgument naming the field and the limit ("submit.req.gpus: 100
// GPUs on one node; at most 64"). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "api/launch_spec.h"
#include "api/protocol.h"
#include "core/status.h"
#include "core/time.h"

namespace hachi::api {

// Resources. Far beyond any real server or cluster, so only nonsense is refused.
inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int kMaxNodes = 10000;
inline constexpr int kMaxCpusPerNode = 65536;
inline constexpr int kMaxCpusPerGpu = 1024;
inline constexpr int64_t kMaxMemoryMib = int64_t{64} << 20;  // 64 TiB
inline constexpr Duration kMaxTimeLimit = 365 * kDay;
inline constexpr int kMaxDependencies = 1000;
// The one array limit: the CLI's --array and job-id parsers and the server's submit
// check read these too.
inline constexpr int kMaxArrayTasks = 10000;
inline constexpr int kMaxArrayTaskId = 4000000;

// Sizes, in bytes (UTF-8) or entries. The body itself is at most 4 MiB
// (kMaxRequestBodyBytes, api/protocol.h); these keep one field from taking all of it
// and keep a job's exec within the kernel's argument limits.
inline constexpr size_t kMaxNameBytes = 256;   // job, partition, QoS, user, account, node
inline constexpr size_t kMaxPathBytes = 4096;  // workdir, output paths, image (PATH_MAX)
inline constexpr size_t kMaxCommentBytes = 4096;  // comment, GPU model list
inline constexpr size_t kMaxScriptBytes = 1 << 20;
inline constexpr size_t kMaxArgvEntries = 4096;
inline constexpr size_t kMaxArgvBytes = 1 << 20;  // all arguments together
inline constexpr size_t kMaxEnvEntries = 4096;
inline constexpr size_t kMaxEnvBytes = 1 << 20;  // all NAME=value strings together
inline constexpr size_t kMaxJobIdList = 100000;  // an agent's running/finished lists
inline constexpr size_t kMaxHealthEvents = 1000;
inline constexpr size_t kMaxMessageBytes = 64 << 10;  // an agent's exit and fault lines

// A submit (POST /jobs), after decoding; `path` prefixes field names ("submit").
Status CheckSubmitLimits(const SubmitRequest& r, const char* path = "submit");
// POST /agents/register, POST /agents/NODE/health, POST /agents/NODE/exits.
Status CheckRegistrationLimits(const AgentRegistration& r);
Status CheckHealthLimits(const AgentHealth& h);
// Only sizes: an agent keeps an exit until the server takes it, so refusing a real one
// for its values would block every later exit of that node.
Status CheckExitLimits(const std::vector<api::JobExit>& exits);

}  // namespace hachi::api
