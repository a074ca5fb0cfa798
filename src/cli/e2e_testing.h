// Helpers the `hachi dev` end-to-end tests share (cli/*_e2e_test.cc): waiting for a
// condition, and a job as `hachi show job --json` gives it. Header-only; tests only.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"
#include "core/testing/wait_for.h"

namespace hachi::cli {

// Whether `pred()` holds within `seconds` (asked every 100 ms, and once more at the end):
// core/testing/wait_for.h's WaitFor, in the argument order these tests were written in.
template <typename Pred>
bool WaitUntil(int seconds, Pred pred) {
  return WaitFor(pred, std::chrono::seconds(seconds), std::chrono::milliseconds(100));
}

// Job `id`'s object from `hachi show job ID --json` (null when it cannot be read).
inline nlohmann::json ShownJob(int64_t id) {
  const nlohmann::json j = nlohmann::json::parse(
      testing::Hachi("show job " + std::to_string(id) + " --json", false).out, nullptr,
      false);
  return j.is_object() && j.contains("job") ? j["job"] : nlohmann::json();
}

// Its state ("RUNNING"), "" when it cannot be read.
inline std::string ShownState(int64_t id) {
  const nlohmann::json j = ShownJob(id);
  return j.is_object() ? j.value("state", "") : "";
}

}  // namespace hachi::cli
