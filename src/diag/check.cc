#include "diag/check.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace hachi::diag {

const char* CheckStatusName(CheckStatus s) {
  switch (s) {
    case CheckStatus::kOk:
      return "OK";
    case CheckStatus::kWarn:
      return "WARN";
    case CheckStatus::kFail:
      return "FAIL";
  }
  return "?";
}

CheckStatus WorstStatus(const std::vector<CheckItem>& items) {
  CheckStatus worst = CheckStatus::kOk;
  for (const CheckItem& c : items) worst = std::max(worst, c.status);
  return worst;
}

int ChecksExitCode(const std::vector<CheckItem>& items) {
  return static_cast<int>(WorstStatus(items));
}

nlohmann::json CheckItemJson(const CheckItem& c) {
  nlohmann::json item = {{"check", c.check}, {"status", CheckStatusName(c.status)}};
  if (c.gpus.size() == 1) {
    item["gpu"] = c.gpus[0];
  } else if (!c.gpus.empty()) {
    item["gpus"] = c.gpus;
  }
  item["evidence"] = c.evidence;
  item["fix"] = c.fix;
  return item;
}

nlohmann::json CheckItemsJson(const std::vector<CheckItem>& items) {
  nlohmann::json out = nlohmann::json::array();
  for (const CheckItem& c : items) out.push_back(CheckItemJson(c));
  return out;
}

}  // namespace hachi::diag
