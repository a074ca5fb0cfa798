// Reading the report objects' JSON back (the CLI's side of GET /report and /priority):
// one checked field at a time, the first problem named with its path.
//
// Includes nlohmann: for the report codecs' .cc files only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

namespace hachi::report {

// Reads `key` of object `j` into `out`; false (and *error) when missing or mistyped.
template <typename T>
bool GetField(const nlohmann::json& j, const char* key, const std::string& path, T* out,
              std::string* error) {
  auto it = j.find(key);
  const bool ok = it != j.end() && (std::is_same_v<T, std::string> ? it->is_string()
                                    : std::is_integral_v<T> ? it->is_number_integer()
                                                            : it->is_number());
  if (!ok) {
    *error = path + "." + key + ": missing or not a " +
             (std::is_same_v<T, std::string> ? "string"
              : std::is_integral_v<T>        ? "integer"
                                             : "number");
    return false;
  }
  *out = it->get<T>();
  return true;
}

}  // namespace hachi::report
