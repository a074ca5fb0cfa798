// JSON text of a TokenRecord as GET /api/v1/tokens lists it (the store keeps tokens in
// rows of its own: row_codec.h). Same rules as api/record_json.h: every field written,
// decoding strict (unknown fields and wrong types are errors naming the field).
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "state/records.h"

namespace hachi::state {

std::string TokenRecordToJson(const TokenRecord& token);
Result<TokenRecord> TokenRecordFromJson(std::string_view text);

}  // namespace hachi::state
