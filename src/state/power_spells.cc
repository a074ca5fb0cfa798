#include "state/power_spells.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "state/json_values.h"

namespace hachi::state {
namespace {

using json = nlohmann::json;

// power.record's format: version 1.
constexpr int kVersion = 1;

}  // namespace

std::string PowerSpellKey(const PowerSpell& s) {
  return s.node + "@" + std::to_string(s.since);
}

double SpellGpuSeconds(const PowerSpell& s, Time from, Time to) {
  const Time a = std::max(from, s.since);
  const Time b = std::min(to, s.until);
  return b > a ? static_cast<double>(s.gpus) * static_cast<double>(b - a) : 0.0;
}

std::string PowerSpellToJson(const PowerSpell& s) {
  return json{{"_v", kVersion},
              {"_min_reader", 1},
              {"node", s.node},
              {"since", s.since},
              {"until", s.until},
              {"open", s.open},
              {"pool", s.pool},
              {"gpus", s.gpus},
              {"price_per_gpu_hour", s.price_per_gpu_hour}}
      .dump();
}

Result<PowerSpell> PowerSpellFromJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("power: not JSON");
  if (!j.is_object()) return InvalidArgument("power: " + JsonTypeProblem("an object", j));
  int min_reader = 1;
  if (auto it = j.find("_min_reader"); it != j.end()) {
    const std::string problem = ReadJsonInt(*it, &min_reader);
    if (!problem.empty()) return InvalidArgument("power._min_reader: " + problem);
  }
  if (min_reader > kVersion) {
    return InvalidArgument("power row needs a reader of version " +
                           std::to_string(min_reader) +
                           " or later; this hachi reads power rows up to version " +
                           std::to_string(kVersion) + " (run a newer hachi)");
  }
  PowerSpell s;
  // Each field: what it is and where it goes; a missing one keeps its default.
  std::string problem;
  const char* field = "";
  auto text_field = [&](const char* key, std::string* out) {
    auto it = j.find(key);
    if (!problem.empty() || it == j.end()) return;
    field = key;
    problem = ReadJsonText(*it, out);
  };
  auto int_field = [&](const char* key, auto* out) {
    auto it = j.find(key);
    if (!problem.empty() || it == j.end()) return;
    field = key;
    problem = ReadJsonInt(*it, out);
  };
  text_field("node", &s.node);
  text_field("pool", &s.pool);
  int_field("since", &s.since);
  int_field("until", &s.until);
  int_field("gpus", &s.gpus);
  if (auto it = j.find("open"); problem.empty() && it != j.end()) {
    field = "open";
    if (it->is_boolean()) {
      s.open = it->get<bool>();
    } else {
      problem = JsonTypeProblem("a boolean", *it);
    }
  }
  if (auto it = j.find("price_per_gpu_hour"); problem.empty() && it != j.end()) {
    field = "price_per_gpu_hour";
    problem = ReadJsonDouble(*it, &s.price_per_gpu_hour);
  }
  if (!problem.empty())
    return InvalidArgument("power." + std::string(field) + ": " + problem);
  if (s.node.empty()) return InvalidArgument("power.node: missing");
  if (s.gpus < 0)
    return InvalidArgument("power.gpus: " + std::to_string(s.gpus) + " < 0");
  if (s.until < s.since) {
    return InvalidArgument("power.until: " + std::to_string(s.until) +
                           " is before since " + std::to_string(s.since));
  }
  return s;
}

}  // namespace hachi::state
