// JSON text of a TokenRecord: how the SQLite store keeps one (a row per token) and how
// GET /api/v1/tokens lists them. Same rules as record_json.h: every field written,
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
