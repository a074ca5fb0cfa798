// libFuzzer target for the JSON the server decodes from untrusted request bodies (a
// submit, an agent's registration, health report and exits: api/protocol_json.h) and
// the records clients decode from its replies (api/record_json.h). Any bytes must
// give a value or an error, never a crash, hang or sanitizer report, and:
//   - whatever a decoder accepts survives encode -> decode unchanged (field for field),
//     so what the server stores is what the client meant;
//   - the encoders take any bytes in strings (a user's environment is not always UTF-8)
//     and what they write decodes again;
//   - the error envelope carries any message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/protocol_json.h"
#include "api/record_json.h"
#include "api/record_json_nlohmann.h"
#include "api/request_limits.h"
#include "fuzz_check.h"

namespace {

using namespace hachi;  // NOLINT: a fuzz target's one function

bool SameSubmit(const api::SubmitRequest& a, const api::SubmitRequest& b) {
  // api::ToJson writes every field of the request and the spec.
  return api::ToJson(a.req) == api::ToJson(b.req) &&
         api::ToJson(a.spec) == api::ToJson(b.spec) && a.hold == b.hold &&
         a.array_tasks == b.array_tasks && a.array_max_running == b.array_max_running;
}

bool SameRegistration(const api::AgentRegistration& a, const api::AgentRegistration& b) {
  return a.node == b.node && a.address == b.address &&
         a.topology_json == b.topology_json && a.cpus == b.cpus &&
         a.memory_mib == b.memory_mib && a.agent_started == b.agent_started &&
         a.instance == b.instance && a.running == b.running && a.finished == b.finished &&
         a.cgroup == b.cgroup;
}

bool SameHealth(const api::AgentHealth& a, const api::AgentHealth& b) {
  if (a.instance != b.instance || a.events.size() != b.events.size()) return false;
  for (size_t i = 0; i < a.events.size(); ++i) {
    const api::GpuHealthEvent &x = a.events[i], &y = b.events[i];
    if (x.gpu != y.gpu || x.kind != y.kind || x.xid != y.xid || x.fault != y.fault ||
        x.message != y.message || x.at != y.at) {
      return false;
    }
  }
  return true;
}

bool SameExits(const std::vector<api::JobExit>& a, const std::vector<api::JobExit>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const api::JobExit &x = a[i], &y = b[i];
    if (x.job != y.job || x.kind != y.kind || x.exit_code != y.exit_code ||
        x.signal != y.signal || x.message != y.message || x.end_time != y.end_time ||
        x.start_time != y.start_time) {
      return false;
    }
  }
  return true;
}

// decode(text) -> a; decode(encode(a)) must succeed and equal a.
template <typename T, typename Decode, typename Encode, typename Same>
void RoundTrip(std::string_view text, Decode decode, Encode encode, Same same,
               const char* what) {
  Result<T> a = decode(text);
  if (!a.ok()) {
    FUZZ_CHECK(a.status().code() == StatusCode::kInvalidArgument, a.status().ToString());
    return;
  }
  const std::string again = encode(*a);
  Result<T> b = decode(again);
  FUZZ_CHECK(b.ok(), std::string(what) + ": its own encoding fails: " +
                         b.status().ToString() + "\n  " + again);
  FUZZ_CHECK(same(*a, *b), std::string(what) + ": changed by a round trip:\n  " + again);
}

// The input's bytes as every kind of string field a client fills from outside data.
void EncodeRawBytes(std::string_view text) {
  const std::string s(text);
  api::SubmitRequest r;
  r.req.gpus = 1;
  r.spec.name = s;
  r.spec.set_argv({s, "x"});
  r.spec.set_script(s);
  r.spec.set_env({{"A", s}});
  r.spec.comment = s;
  const std::string body = api::SubmitRequestToJson(r);
  Result<api::SubmitRequest> back = api::SubmitRequestFromJson(body);
  // Refused only by the limits (a NUL, a long value); a form error would mean the
  // encoder wrote junk. Read back, every byte is as it was: not UTF-8 goes as base64.
  FUZZ_CHECK(back.ok() || !api::CheckSubmitLimits(r).ok() ||
                 back.status().message().find("at most") != std::string::npos,
             back.status().ToString());
  if (back.ok()) {
    FUZZ_CHECK(back->spec.name == s && back->spec.argv() == r.spec.argv() &&
                   back->spec.script() == s && back->spec.env() == r.spec.env() &&
                   back->spec.comment == s,
               "the bytes changed on the way");
  }

  api::AgentRegistration reg;
  reg.node = s;
  reg.topology_json = "{}";
  FUZZ_CHECK(
      api::AgentRegistrationFromJson(api::AgentRegistrationToJson(reg)).status().code() !=
          StatusCode::kInternal,
      "registration");
  api::JobExit x;
  x.job = 1;
  x.message = s;
  (void)api::JobExitsFromJson(api::JobExitsToJson({x}));

  const std::string err = api::ErrorToJson(InvalidArgument(s));
  const Status st = api::StatusFromError(400, err);
  FUZZ_CHECK(st.code() == StatusCode::kInvalidArgument, st.ToString());
  (void)api::StatusFromError(500, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  RoundTrip<api::SubmitRequest>(text, api::SubmitRequestFromJson,
                                api::SubmitRequestToJson, SameSubmit, "submit");
  RoundTrip<api::AgentRegistration>(text, api::AgentRegistrationFromJson,
                                    api::AgentRegistrationToJson, SameRegistration,
                                    "register");
  RoundTrip<api::AgentHealth>(text, api::AgentHealthFromJson, api::AgentHealthToJson,
                              SameHealth, "health");
  RoundTrip<std::vector<api::JobExit>>(text, api::JobExitsFromJson, api::JobExitsToJson,
                                       SameExits, "exits");
  // The work poll's answer: its encoding is canonical, so compare the encodings.
  RoundTrip<api::AgentWork>(
      text, api::AgentWorkFromJson, api::AgentWorkToJson,
      [](const api::AgentWork& a, const api::AgentWork& b) {
        return api::AgentWorkToJson(a) == api::AgentWorkToJson(b);
      },
      "work");
  RoundTrip<state::JobRecord>(
      text, api::JobRecordFromJson, api::JobRecordToJson,
      [](const state::JobRecord& a, const state::JobRecord& b) {
        return api::ToJson(a) == api::ToJson(b);
      },
      "job");
  RoundTrip<state::NodeStatus>(
      text, api::NodeStatusFromJson, api::NodeStatusToJson,
      [](const state::NodeStatus& a, const state::NodeStatus& b) {
        return api::ToJson(a) == api::ToJson(b);
      },
      "node");
  EncodeRawBytes(text);
  return 0;
}
