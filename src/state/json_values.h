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
#include <string>
#include <string_view>
#include <type_traits>

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

}  // namespace hachi::state
