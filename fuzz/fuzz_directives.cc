// libFuzzer target for `hachi submit`'s parsers (cli/directives.h): the #SBATCH /
// #HACHI lines of a batch script, and the same text split into argv as flags. Any
// bytes must give options or an error, never a crash, hang or sanitizer report, and
// whatever is accepted must make sense:
//   - every directive occurrence is located in the script ("job.sh:N: ...");
//   - the request has nodes >= 1 and no negative count (but --mem=0's all-of-node
//     marker, sched::kAllOfNodeMemory); an array has 1..kMaxArrayTasks
//     distinct, ascending task ids;
//   - the submit body the CLI would send decodes on the server as the same request
//     (or is refused by the server's limits, with a message), never as a form error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/protocol_json.h"
#include "api/request_limits.h"
#include "cli/directives.h"
#include "fuzz_check.h"
#include "sched/cluster.h"

namespace {

using namespace hachi;  // NOLINT: a fuzz target's one function

void CheckOptions(const cli::SubmitOptions& o) {
  const sched::JobRequest& r = o.req;
  FUZZ_CHECK(r.nodes >= 1, std::to_string(r.nodes));
  FUZZ_CHECK(r.gpus >= 0 && r.gpus_per_node >= 0 && r.cpus >= 0 && r.cpus_per_gpu >= 0 &&
                 (r.memory_mib >= 0 || r.memory_mib == sched::kAllOfNodeMemory) &&
                 r.memory_mib_per_gpu >= 0 && r.time_limit >= 0 &&
                 r.gpu_share_milli >= 0 && r.gpu_share_milli < 1000 &&
                 r.gpu_memory_mib >= 0 && o.spec.shm_mib >= 0,
             "a negative number in the request");
  if (!o.array.empty()) {
    const std::vector<int> ids = cli::ExpandArray(o.array);
    FUZZ_CHECK(!ids.empty() && ids.size() <= static_cast<size_t>(api::kMaxArrayTasks),
               std::to_string(ids.size()));
    for (size_t i = 1; i < ids.size(); ++i)
      FUZZ_CHECK(ids[i - 1] < ids[i], "not ascending");
    FUZZ_CHECK(ids.front() >= 0 && ids.back() <= api::kMaxArrayTaskId, "task id range");
  }

  // What `hachi submit` would send (job_cmds.cc BuildRequest, without the environment).
  api::SubmitRequest s;
  s.req = o.req;
  s.spec = o.spec;
  s.hold = o.hold;
  if (!o.array.empty()) {
    s.array_tasks = cli::ExpandArray(o.array);
    s.array_max_running = o.array.max_running;
  }
  if (o.time_unlimited) s.req.time_limit = -1;
  Result<api::SubmitRequest> back =
      api::SubmitRequestFromJson(api::SubmitRequestToJson(s));
  if (!back.ok()) {
    // The server's limits (docs/api.md, "Limits": a NUL byte, 10^9 GPUs) may refuse what
    // the CLI parsed, with a message, and so may a text field (partition, QoS, account)
    // that is not UTF-8 ("Bytes that are not UTF-8"); anything else is a body the server
    // misreads.
    const std::string& why = back.status().message();
    FUZZ_CHECK(!api::CheckSubmitLimits(s).ok() ||
                   why.find("at most") != std::string::npos ||
                   why.find("not valid UTF-8") != std::string::npos,
               back.status().ToString());
    return;
  }
  FUZZ_CHECK(back->req.gpus == s.req.gpus && back->req.nodes == s.req.nodes &&
                 back->req.time_limit == s.req.time_limit &&
                 back->req.dependencies.size() == s.req.dependencies.size() &&
                 back->array_tasks == s.array_tasks &&
                 back->spec.name == s.spec.name,  // bytes, carried exactly
             "the server reads another request than the CLI built");
}

// Splits at newlines: each line one argv word, as a shell would pass them.
std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size() && out.size() < 256) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    out.emplace_back(text.substr(start, end - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const cli::ParsedOptions none;

  Result<cli::ParsedOptions> d = cli::ParseDirectives(text, "job.sh");
  if (d.ok()) {
    for (const cli::OptionOccurrence& o : d->options) {
      FUZZ_CHECK(o.where.rfind("job.sh:", 0) == 0, o.where);
      FUZZ_CHECK(o.source == 0 || o.source == 1, o.where);
    }
    Result<cli::SubmitOptions> o = cli::BuildSubmitOptions(*d, none);
    if (o.ok()) CheckOptions(*o);
  }

  Result<cli::ParsedOptions> f = cli::ParseFlags(Words(text));
  if (f.ok()) {
    Result<cli::SubmitOptions> o = cli::BuildSubmitOptions(d.ok() ? *d : none, *f);
    if (o.ok()) CheckOptions(*o);
  }

  // The value parsers on their own, on the first line (flags' values reach them as is).
  const std::string_view first = text.substr(0, text.find('\n'));
  bool unlimited = false;
  Result<Duration> t = cli::ParseTimeLimit(first, &unlimited);
  if (t.ok()) FUZZ_CHECK(*t >= 0, std::to_string(*t));
  Result<int64_t> m = cli::ParseSizeMib(first);
  if (m.ok()) FUZZ_CHECK(*m >= 0, std::to_string(*m));
  Result<cli::ArraySpec> a = cli::ParseArraySpec(first);
  if (a.ok()) {
    FUZZ_CHECK(cli::ExpandArray(*a).size() <= static_cast<size_t>(api::kMaxArrayTasks),
               "array size");
  }
  return 0;
}
