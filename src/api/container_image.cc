#include "api/container_image.h"

#include <string>

namespace hachi::api {
namespace {

bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool Allowed(char c) {
  switch (c) {
    case '.':
    case '_':
    case '-':
    case '/':
    case ':':
    case '@':
    case '#':
    case '+':
    case '~':
    case '%':
      return true;
    default:
      return Alnum(c);
  }
}

// The value as the error shows it: printable ASCII as is, anything else as \xNN, cut.
std::string Shown(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace

Status CheckContainerImage(std::string_view image) {
  if (image.empty()) return Status::Ok();
  const std::string what = "container_image: '" + Shown(image) + "' ";
  if (image.size() > kMaxContainerImageBytes) {
    return InvalidArgument(what + "is longer than " +
                           std::to_string(kMaxContainerImageBytes) + " bytes");
  }
  if (image[0] == '-') {
    return InvalidArgument(
        what + "starts with '-': an image name, not an option of the runtime");
  }
  if (!Alnum(image[0]) && image[0] != '/' && image[0] != '.') {
    return InvalidArgument(what + "must start with a letter, a digit, '/' or '.'");
  }
  for (size_t i = 0; i < image.size(); ++i) {
    if (!Allowed(image[i])) {
      return InvalidArgument(
          what + "holds '" + Shown(image.substr(i, 1)) + "' at byte " +
          std::to_string(i) +
          ": an image reference is letters, digits and . _ - / : @ # + ~ % only");
    }
  }
  return Status::Ok();
}

}  // namespace hachi::api
