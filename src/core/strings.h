// Small string helpers shared by the readers and the CLI. Pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hachi {

std::string_view Trim(std::string_view s);
std::vector<std::string_view> Split(std::string_view s, char sep);
// Splits into lines; handles "\n" and "\r\n"; keeps empty lines.
std::vector<std::string_view> SplitLines(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);
// Parses a whole non-negative or negative decimal integer; nullopt otherwise.
std::optional<long long> ParseInt(std::string_view s);
// Reads a whole file. Returns nullopt (and sets *error) on failure.
std::optional<std::string> ReadFile(const std::string& path, std::string* error);
// Reads `fd` to its end (EINTR retried), at most `max_bytes`: nullopt with *error set on
// a read error or past the bound ("more than N bytes"). Does not close it.
std::optional<std::string> ReadFd(int fd, size_t max_bytes, std::string* error);
std::string ToLower(std::string_view s);
// Removes terminal escape sequences (CSI "ESC [ ... final", and two-byte "ESC x"), which
// nvidia-smi writes into `topo -m`'s header (underline) even when its output is a pipe.
std::string StripAnsiEscapes(std::string_view s);
// Client text quoted in an error ("unknown field '...'"): at most `max_bytes` bytes,
// cut before a UTF-8 continuation byte and marked "..." when cut, so that a 3 MB field
// name makes a short error, not a 3 MB one.
std::string Clip(std::string_view s, size_t max_bytes = 64);
// What follows the last '/' ("/usr/bin/psql" -> "psql"; no '/': all of it).
std::string BaseName(std::string_view path);

}  // namespace hachi
