#include "state/token_json.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace hachi::state {

using nlohmann::json;

std::string TokenRecordToJson(const TokenRecord& t) {
  return json{{"id", t.id},           {"sha256", t.sha256},
              {"user", t.user},       {"uid", t.uid},
              {"gid", t.gid},         {"admin", t.admin},
              {"created", t.created}, {"created_by", t.created_by}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<TokenRecord> TokenRecordFromJson(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("token: not a JSON object");
  TokenRecord t;
  for (const auto& item : j.items()) {
    // Named copies, not structured bindings: lambdas capture those only from C++20
    // compilers newer than the clang 14 the fuzz build uses.
    const std::string& key = item.key();
    const json& v = item.value();
    const std::string path = "token." + Clip(key);
    auto want_string = [&](std::string* out) -> Status {
      if (!v.is_string()) return InvalidArgument(path + ": expected a string");
      *out = v.get<std::string>();
      return Status::Ok();
    };
    auto want_id = [&](uint32_t* out) -> Status {
      if (!v.is_number_unsigned() ||
          v.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgument(path + ": expected a uid/gid");
      }
      *out = v.get<uint32_t>();
      return Status::Ok();
    };
    if (key == "id") {
      HACHI_RETURN_IF_ERROR(want_string(&t.id));
    } else if (key == "sha256") {
      HACHI_RETURN_IF_ERROR(want_string(&t.sha256));
    } else if (key == "user") {
      HACHI_RETURN_IF_ERROR(want_string(&t.user));
    } else if (key == "created_by") {
      HACHI_RETURN_IF_ERROR(want_string(&t.created_by));
    } else if (key == "uid") {
      HACHI_RETURN_IF_ERROR(want_id(&t.uid));
    } else if (key == "gid") {
      HACHI_RETURN_IF_ERROR(want_id(&t.gid));
    } else if (key == "admin") {
      if (!v.is_boolean()) return InvalidArgument(path + ": expected true or false");
      t.admin = v.get<bool>();
    } else if (key == "created") {
      if (!v.is_number_integer()) return InvalidArgument(path + ": expected an integer");
      t.created = v.get<Time>();
    } else {
      return InvalidArgument(path + ": unknown field");
    }
  }
  return t;
}

}  // namespace hachi::state
