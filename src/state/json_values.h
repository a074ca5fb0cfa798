// The JSON leaf checks both record codecs share — the store's rows (state/row_codec.cc)
// and the API's objects (api/record_json.cc): what a wrong value is called in an error,
// and an integer read with its range checked. The codecs' field lists are apart on
// purpose (docs/storage.md); how a value is checked is one piece of code.
//
// Includes nlohmann: for codec .cc files only, never a widely included header.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/bytes.h"

namespace hachi::state {

// "string", "array", "number 1.5": what a JSON value is, for an error.
inline std::string JsonDescribe(const nlohmann::json& j) {
  if (j.is_number_float()) return "number " + j.dump();
  return j.type_name();
}

// What is wrong with a value, without its path (the caller adds the path only on error,
// so that decoding a valid record allocates no path strings).
inline std::string JsonTypeProblem(std::string_view expected, const nlohmann::json& got) {
  return "expected " + std::string(expected) + ", got " + JsonDescribe(got);
}

// Reads a number (integer or not) into `out`: "" on success, else the problem.
inline std::string ReadJsonDouble(const nlohmann::json& v, double* out) {
  if (!v.is_number()) return JsonTypeProblem("a number", v);
  *out = v.get<double>();
  return "";
}

// Reads an integer into `out` when it is one and fits T: "" on success, else the
// problem ("expected an integer, got string", "-1 is out of range (0..4294967295)").
template <typename T>
std::string ReadJsonInt(const nlohmann::json& v, T* out) {
  constexpr auto kMin = std::numeric_limits<T>::min();
  constexpr auto kMax = std::numeric_limits<T>::max();
  if (!v.is_number_integer()) return JsonTypeProblem("an integer", v);
  bool fits;
  if (v.is_number_unsigned()) {
    fits = v.get<uint64_t>() <= static_cast<uint64_t>(kMax);
  } else {
    const int64_t x = v.get<int64_t>();
    if constexpr (std::is_signed_v<T>) {
      fits = x >= static_cast<int64_t>(kMin) && x <= static_cast<int64_t>(kMax);
    } else {
      fits = x >= 0 && static_cast<uint64_t>(x) <= static_cast<uint64_t>(kMax);
    }
  }
  if (!fits) {
    return v.dump() + " is out of range (" + std::to_string(kMin) + ".." +
           std::to_string(kMax) + ")";
  }
  *out = v.get<T>();
  return "";
}

// Bytes as JSON (docs/api.md, "Bytes that are not UTF-8"): valid UTF-8 stays a JSON
// string, so clients see what they always saw; anything else is {"base64": "..."}, and
// nothing is ever replaced. Every codec writes a job's script, argv, environment, paths,
// name and comment with this, and any text whose source may hold other bytes.
inline nlohmann::json JsonBytes(const std::string& bytes) {
  if (IsValidUtf8(bytes)) return bytes;
  return nlohmann::json{{"base64", Base64Encode(bytes)}};
}

// Reads what JsonBytes wrote: a string, or an object holding exactly one "base64"
// string in canonical form. "" on success, else the problem.
inline std::string ReadJsonBytes(const nlohmann::json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return "";
  }
  if (!v.is_object()) return JsonTypeProblem("a string", v);
  auto it = v.find("base64");
  if (v.size() != 1 || it == v.end() || !it->is_string()) {
    return "expected a string or {\"base64\": \"...\"}, got an object with other fields";
  }
  std::optional<std::string> bytes = Base64Decode(it->get_ref<const std::string&>());
  if (!bytes) return "base64: not valid base64 (RFC 4648, padded)";
  *out = std::move(*bytes);
  return "";
}

// A field that must be text (a partition, a user or node name, an image): the bytes
// form is accepted only when it holds UTF-8, and refused by name otherwise — never
// replaced ("partition: not valid UTF-8").
inline std::string ReadJsonText(const nlohmann::json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return "";
  }
  std::string bytes;
  if (std::string problem = ReadJsonBytes(v, &bytes); !problem.empty()) return problem;
  if (!IsValidUtf8(bytes))
    return "not valid UTF-8 (" + std::to_string(bytes.size()) + " bytes)";
  *out = std::move(bytes);
  return "";
}

}  // namespace hachi::state
