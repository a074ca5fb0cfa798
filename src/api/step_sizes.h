// What a step report's parts take as JSON (api/step_json.cc writes them; docs/api.md,
// "Steps"), for an agent that keeps each report well under the server's body limit
// (kMaxRequestBodyBytes) whatever its tasks wrote. Upper bounds, exact for chunk data.
// Header-only, so that the agent's step runner (which does not link the codecs) and the
// codec share one rule for a chunk's form. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/protocol.h"
#include "core/bytes.h"

namespace hachi::api {

// What valid UTF-8 takes as a JSON string as the codecs write it: its quotes, two bytes
// for \" \\ \b \f \n \r \t and six (\u00XX) for any other control byte.
inline int64_t JsonStringBytes(std::string_view s) {
  int64_t n = 2;
  for (const unsigned char ch : s) {
    switch (ch) {
      case '"':
      case '\\':
      case '\b':
      case '\f':
      case '\n':
      case '\r':
      case '\t':
        n += 2;
        break;
      default:
        n += ch < 0x20 ? 6 : 1;
    }
  }
  return n;
}

// {"base64":"..."} for `n` bytes.
constexpr int64_t Base64FormBytes(int64_t n) { return 13 + 4 * ((n + 2) / 3); }

// A task's output is bytes, and a lot of it: a chunk's data goes as a string only when
// that is no larger than base64 would be. As text a NUL takes six bytes (\u0000), so a
// task printing control bytes would make a report six times its output and past the
// server's body limit; this way a chunk never takes more than 4 bytes for 3, and text
// stays readable. Both forms are state::JsonBytes' (ReadJsonBytes reads either).
inline bool ChunkDataAsText(const std::string& d) {
  return IsValidUtf8(d) &&
         JsonStringBytes(d) <= Base64FormBytes(static_cast<int64_t>(d.size()));
}

// A chunk's fields other than its data, with the comma before it, at most:
// ,{"data":,"fd":1,"lost":<19 digits>,"task":<11 characters>} is 63.
inline constexpr int64_t kChunkFieldsBytes = 64;
// A report's own fields (all but its chunks' and exits' contents, with the comma before
// it), and the body around the reports (an `instance` of up to 64 bytes).
inline constexpr int64_t kStepReportJsonBytes = 192;
inline constexpr int64_t kStepReportsJsonBytes = 512;

inline int64_t OutputChunkJsonBytes(const OutputChunk& c) {
  const int64_t size = static_cast<int64_t>(c.data.size());
  return kChunkFieldsBytes +
         (ChunkDataAsText(c.data) ? JsonStringBytes(c.data) : Base64FormBytes(size));
}

// The most data bytes a chunk may hold to take at most `json_bytes` whatever the bytes
// are (base64's size is the most either form takes); 0 when not even an empty one fits.
inline int64_t OutputChunkDataFitting(int64_t json_bytes) {
  const int64_t room = json_bytes - kChunkFieldsBytes - Base64FormBytes(0);
  return room < 4 ? 0 : room / 4 * 3;
}

// Its integers, kind and keys take under 160 bytes; its texts at most six a byte
// (\u00XX; a byte that is not UTF-8 becomes U+FFFD, three).
inline int64_t TaskExitJsonBytes(const TaskExit& e) {
  return 160 + 6 * static_cast<int64_t>(e.message.size() + e.node.size());
}

}  // namespace hachi::api
