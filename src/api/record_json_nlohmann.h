// The state records as nlohmann::json values, for code that embeds them in bigger
// documents (api/ requests and replies). Same format and strictness as api/record_json.h
// (docs/api.md, "Job and node objects"); include this header only where nlohmann is
// already used, and link nlohmann_json::nlohmann_json there.
//
// FromJson starts from the struct's defaults, reads the fields present, and on error
// leaves *out unchanged and returns kInvalidArgument naming the field path, which
// starts at `path` ("job.req.gpus: expected an integer, got string"). Nothing throws.
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/status.h"
#include "sched/cluster.h"
#include "state/records.h"

namespace hachi::api {

nlohmann::json ToJson(const sched::JobRequest& req);
nlohmann::json ToJson(const state::JobSpec& spec);
nlohmann::json ToJson(const state::NodeAllocation& alloc);
nlohmann::json ToJson(const state::JobRecord& job);
nlohmann::json ToJson(const state::NodeRecord& node);
nlohmann::json ToJson(
    const state::NodeStatus& node);  // flat: record fields + derived ones
nlohmann::json ToJson(const state::StepRecord& step);  // with "id", "12.0"

Status FromJson(const nlohmann::json& j, sched::JobRequest* out,
                std::string_view path = "req");
Status FromJson(const nlohmann::json& j, state::JobSpec* out,
                std::string_view path = "spec");
Status FromJson(const nlohmann::json& j, state::NodeAllocation* out,
                std::string_view path = "allocation");
Status FromJson(const nlohmann::json& j, state::JobRecord* out,
                std::string_view path = "job");
Status FromJson(const nlohmann::json& j, state::NodeRecord* out,
                std::string_view path = "node");
Status FromJson(const nlohmann::json& j, state::NodeStatus* out,
                std::string_view path = "node");
Status FromJson(const nlohmann::json& j, state::StepRecord* out,
                std::string_view path = "step");

}  // namespace hachi::api
