// Burn-in's messages (docs/api.md "Burn-in"): the run in the agent's work and
// the agent's report of it.
#include <string>
#include <vector>

#include "api/json_fields.h"
#include "api/protocol_json.h"

namespace hachi::api {
using namespace json_fields;
namespace {

// What a report may carry: a reason is one line for `hachi nodes`, a check its config
// entry; longer is an agent's bug or an attack, refused by name.
constexpr size_t kMaxReasonBytes = 2048;
constexpr size_t kMaxCheckBytes = 4096;
constexpr size_t kMaxChecks = 64;

Status Bounded(const std::string& path, const std::string& s, size_t max) {
  if (s.size() > max) {
    return InvalidArgument(path + ": " + std::to_string(s.size()) + " bytes, at most " +
                           std::to_string(max));
  }
  return Status::Ok();
}

}  // namespace

void AddBurnInWorkToJson(const AgentWork& w, json* j) {
  if (!w.burn_in) return;  // absent when none: an older agent reads the rest
  const BurnInWork& b = *w.burn_in;
  (*j)["burn_in"] = json{
      {"run", b.run}, {"checks", b.checks}, {"gpus", b.gpus}, {"timeout", b.timeout}};
}

Status BurnInWorkFromJson(const json& j, AgentWork* w) {
  auto it = j.find("burn_in");
  if (it == j.end()) return Status::Ok();
  const std::string path = "work.burn_in";
  if (!it->is_object()) return InvalidArgument(path + ": expected an object");
  HACHI_RETURN_IF_ERROR(OnlyKeys(*it, path, {"run", "checks", "gpus", "timeout"}));
  BurnInWork b;
  HACHI_RETURN_IF_ERROR(GetInt(*it, "run", path, &b.run));
  HACHI_RETURN_IF_ERROR(StringList(*it, "checks", path, &b.checks));
  HACHI_RETURN_IF_ERROR(GetIntList(*it, "gpus", path, &b.gpus));
  HACHI_RETURN_IF_ERROR(GetInt(*it, "timeout", path, &b.timeout));
  if (b.checks.size() > kMaxChecks) {
    return InvalidArgument(path + ".checks: " + std::to_string(b.checks.size()) +
                           " checks, at most " + std::to_string(kMaxChecks));
  }
  for (const std::string& c : b.checks) {
    HACHI_RETURN_IF_ERROR(Bounded(path + ".checks", c, kMaxCheckBytes));
  }
  for (int g : b.gpus) {
    if (g < 0 || g >= GpuSet::kMaxGpus) {
      return InvalidArgument(path + ".gpus: " + std::to_string(g) +
                             " is not a GPU index");
    }
  }
  if (b.timeout <= 0) return InvalidArgument(path + ".timeout: must be more than 0");
  w->burn_in = std::move(b);
  return Status::Ok();
}

std::string BurnInReportToJson(const BurnInReport& r) {
  return Dump(json{{"instance", r.instance},
                   {"run", r.run},
                   {"passed", r.passed},
                   {"check", r.check},
                   {"reason", r.reason}});
}

Result<BurnInReport> BurnInReportFromJson(std::string_view text) {
  Result<json> j = Parse(text, "burn-in");
  if (!j.ok()) return j.status();
  BurnInReport r;
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(*j, "burn-in", {"instance", "run", "passed", "check", "reason"}));
  HACHI_RETURN_IF_ERROR(GetString(*j, "instance", "burn-in", &r.instance));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "run", "burn-in", &r.run));
  HACHI_RETURN_IF_ERROR(GetBool(*j, "passed", "burn-in", &r.passed));
  HACHI_RETURN_IF_ERROR(GetString(*j, "check", "burn-in", &r.check));
  HACHI_RETURN_IF_ERROR(GetString(*j, "reason", "burn-in", &r.reason));
  HACHI_RETURN_IF_ERROR(Bounded("burn-in.instance", r.instance, kMaxReasonBytes));
  HACHI_RETURN_IF_ERROR(Bounded("burn-in.check", r.check, kMaxCheckBytes));
  HACHI_RETURN_IF_ERROR(Bounded("burn-in.reason", r.reason, kMaxReasonBytes));
  if (!r.passed && r.reason.empty()) {
    return InvalidArgument("burn-in.reason: a failed run must say why");
  }
  return r;
}

}  // namespace hachi::api
