// The check items every node check reports (`hachi commtest`, `hachi doctor`): one
// finding each, OK / WARN / FAIL, with its evidence and the fix, and their shared JSON
// form, which the burn-in gate reads (the first FAIL item's check and evidence are its
// reason). Plain values; the functions are pure.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace hachi::diag {

// Ordered by severity: the worst of several is their maximum.
enum class CheckStatus { kOk = 0, kWarn = 1, kFail = 2 };
const char* CheckStatusName(CheckStatus s);  // "OK", "WARN", "FAIL"

struct CheckItem {
  std::string check;  // "persistence", "commtest-p2p", ...
  CheckStatus status = CheckStatus::kOk;
  std::vector<int> gpus;  // none (node-wide), one GPU ("gpu") or several ("gpus")
  std::string evidence;   // what was read or measured, naming the GPU when there is one
  std::string fix;        // empty for OK
};

// The worst status of `items` (kOk when empty).
CheckStatus WorstStatus(const std::vector<CheckItem>& items);
// The exit code of a command that reports `items`: 0 all OK, 1 the worst is a WARN,
// 2 a FAIL (the same as `hachi topo check`).
int ChecksExitCode(const std::vector<CheckItem>& items);

// One item as JSON: {"check", "status", "gpu" | "gpus" (absent when node-wide),
// "evidence", "fix"}.
nlohmann::json CheckItemJson(const CheckItem& c);
// Every item, in order, as a JSON array.
nlohmann::json CheckItemsJson(const std::vector<CheckItem>& items);

}  // namespace hachi::diag
