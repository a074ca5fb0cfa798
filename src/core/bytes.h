// Bytes that may not be text: a UTF-8 check and base64 (RFC 4648, with padding), for
// the JSON codecs that must carry a job's script, argv, environment and paths byte for
// byte (state/json_values.h: JsonBytes / ReadJsonBytes; docs/api.md, "Bytes that are
// not UTF-8"). Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hachi {

// Well-formed UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates
// (U+D800..U+DFFF), nothing above U+10FFFF. NUL bytes are valid UTF-8.
bool IsValidUtf8(std::string_view s);

std::string Base64Encode(std::string_view bytes);
// The standard alphabet with '=' padding, length a multiple of 4; nullopt for anything
// else (whitespace, the URL alphabet, a missing pad, bits set after the last byte).
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace hachi
