// SHA-256 (FIPS 180-4), for storing API tokens as hashes (server/auth.h): the server
// keeps only the digest of each token it issued and hashes what a client presents.
// A small implementation of our own rather than libcrypto, so src/core/ links nothing
// and the tokens do not depend on how TLS is built. Not for bulk data (no SIMD).
//
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hachi {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(std::string_view data);
// The digest as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);
// HMAC-SHA256 (RFC 2104) of `message` under `key`, as 64 lowercase hex digits: the job
// credentials (server/auth.h) are made and checked with it.
std::string HmacSha256Hex(std::string_view key, std::string_view message);

}  // namespace hachi
