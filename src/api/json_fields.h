// The JSON field readers and writers the API's message codecs share (protocol_json.cc
// for the agent and user messages, step_json.cc for job steps): strict reads that name
// the field on error, and the exit kinds' names. Internal to api/; includes nlohmann, so
// codec .cc files only.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/protocol.h"
#include "core/status.h"
#include "core/strings.h"

namespace hachi::api::json_fields {

using nlohmann::json;

inline Result<json> Parse(std::string_view text, std::string_view what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgument(std::string(what) + ": the body is not valid JSON");
  }
  if (!j.is_object()) return InvalidArgument(std::string(what) + ": expected an object");
  return j;
}

// Fails on a key outside `known`, naming it (clients learn of typos at once).
inline Status OnlyKeys(const json& j, std::string_view path,
                       std::initializer_list<const char*> known) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok)
      return InvalidArgument(std::string(path) + ": unknown field '" + Clip(it.key()) +
                             "'");
  }
  return Status::Ok();
}

template <typename T>
inline Status GetInt(const json& j, const char* key, std::string_view path, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_number_integer()) {
    return InvalidArgument(std::string(path) + "." + key + ": expected an integer, got " +
                           it->type_name());
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX}) {
    return InvalidArgument(std::string(path) + "." + key + ": " + it->dump() +
                           " is out of range");
  }
  const int64_t v = it->get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      (v > 0 &&
       static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
    return InvalidArgument(std::string(path) + "." + key + ": " + std::to_string(v) +
                           " is out of range");
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

inline Status GetString(const json& j, const char* key, std::string_view path,
                        std::string* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_string()) {
    return InvalidArgument(std::string(path) + "." + key + ": expected a string, got " +
                           it->type_name());
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

inline Status GetBool(const json& j, const char* key, std::string_view path, bool* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_boolean()) {
    return InvalidArgument(std::string(path) + "." + key + ": expected a boolean, got " +
                           it->type_name());
  }
  *out = it->get<bool>();
  return Status::Ok();
}

template <typename T>
inline Status GetIntList(const json& j, const char* key, std::string_view path,
                         std::vector<T>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  const std::string p = std::string(path) + "." + key;
  if (!it->is_array()) return InvalidArgument(p + ": expected an array");
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    const std::string item = p + "[" + std::to_string(i) + "]";
    if (!v.is_number_integer()) {
      return InvalidArgument(item + ": expected an integer, got " + v.type_name());
    }
    // Checked before the conversion, which would wrap 4294967297 to 1 for an int.
    constexpr auto kMin = std::numeric_limits<T>::min();
    constexpr auto kMax = std::numeric_limits<T>::max();
    const bool fits = v.is_number_unsigned()
                          ? v.get<uint64_t>() <= static_cast<uint64_t>(kMax)
                          : v.get<int64_t>() >= static_cast<int64_t>(kMin) &&
                                v.get<int64_t>() <= static_cast<int64_t>(kMax);
    if (!fits) return InvalidArgument(item + ": " + v.dump() + " is out of range");
    out->push_back(v.get<T>());
  }
  return Status::Ok();
}

// Encodes as the record codecs do: bytes that are not UTF-8 (a user's environment, a
// script) become U+FFFD instead of an exception.
inline std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

inline std::string_view ExitKindName(api::ExitKind k) {
  switch (k) {
    case api::ExitKind::kExited:
      return "exited";
    case api::ExitKind::kSignaled:
      return "signaled";
    case api::ExitKind::kTimeLimit:
      return "time_limit";
    case api::ExitKind::kCancelled:
      return "cancelled";
    case api::ExitKind::kOutOfMemory:
      return "out_of_memory";
    case api::ExitKind::kLaunchFailed:
      return "launch_failed";
    case api::ExitKind::kLost:
      return "lost";
  }
  return "exited";
}

inline bool ParseExitKind(std::string_view s, api::ExitKind* out) {
  for (api::ExitKind k :
       {api::ExitKind::kExited, api::ExitKind::kSignaled, api::ExitKind::kTimeLimit,
        api::ExitKind::kCancelled, api::ExitKind::kOutOfMemory,
        api::ExitKind::kLaunchFailed, api::ExitKind::kLost}) {
    if (ExitKindName(k) == s) {
      *out = k;
      return true;
    }
  }
  return false;
}

inline Status StringList(const json& j, const char* key, std::string_view path,
                         std::vector<std::string>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  const std::string p = std::string(path) + "." + key;
  if (!it->is_array()) return InvalidArgument(p + ": expected an array of strings");
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_string()) {
      return InvalidArgument(p + "[" + std::to_string(i) + "]: expected a string, got " +
                             v.type_name());
    }
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

}  // namespace hachi::api::json_fields

namespace hachi::api {

// The steps' part of the agent's work (step_json.cc), which AgentWorkToJson and
// AgentWorkFromJson (protocol_json.cc) call.
void AddStepWorkToJson(const AgentWork& w, nlohmann::json* j);
Status StepWorkFromJson(const nlohmann::json& j, AgentWork* w);
// The burn-in part of the agent's work (burn_in_json.cc), likewise; absent when none.
void AddBurnInWorkToJson(const AgentWork& w, nlohmann::json* j);
Status BurnInWorkFromJson(const nlohmann::json& j, AgentWork* w);

}  // namespace hachi::api
