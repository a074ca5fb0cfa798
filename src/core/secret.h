// Secrets: random tokens from the kernel, comparisons that take the same time whatever
// the bytes, and secret files that only their owner can read (the CLI's token file, the
// cluster secret agents share with the server; docs/api.md "Authentication").
//
// Free functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace hachi {

// `bytes` random bytes from getrandom(2), as 2 * bytes lowercase hex digits.
// kInternal only when the kernel refuses (it blocks until its pool is seeded).
Result<std::string> RandomHex(size_t bytes);

// a == b, in a time that depends on the lengths only: a token's bytes must not leak
// through how long a comparison takes.
bool SecretEquals(std::string_view a, std::string_view b);

// The secret in `path`, surrounding whitespace trimmed. Refused (kPermissionDenied) when
// the file can be read or written by its group or others: a secret anyone can read is
// no secret, and saying so beats using it. kNotFound when it cannot be read;
// kInvalidArgument when it is empty.
Result<std::string> ReadSecretFile(const std::string& path);

// Writes `secret` and a newline to a new file `path`, mode 0600 (kUnavailable when it
// exists or cannot be created: a secret is never overwritten).
Status WriteSecretFile(const std::string& path, std::string_view secret);

}  // namespace hachi
