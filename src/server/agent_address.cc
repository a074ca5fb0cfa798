#include "server/agent_address.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstring>
#include <string_view>

#include "server/auth.h"  // IsLoopback

namespace hachi::server {
namespace {

bool IsIp(const std::string& a) {
  in_addr v4{};
  in6_addr v6{};
  return ::inet_pton(AF_INET, a.c_str(), &v4) == 1 ||
         ::inet_pton(AF_INET6, a.c_str(), &v6) == 1;
}

bool IsUnspecified(const std::string& a) {
  in_addr v4{};
  if (::inet_pton(AF_INET, a.c_str(), &v4) == 1) return v4.s_addr == INADDR_ANY;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, a.c_str(), &v6) == 1) {
    return std::memcmp(&v6, &in6addr_any, sizeof v6) == 0;
  }
  return false;
}

// RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens, each
// 1-63 characters, 253 in all; the last label not all digits (so "10.0.0" is neither an
// address nor a name).
bool IsHostName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  if (name.back() == '.') name.remove_suffix(1);  // the root, "host.example."
  bool last_all_digits = false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view label = name.substr(start, end - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' ||
        label.back() == '-') {
      return false;
    }
    last_all_digits = true;
    for (char c : label) {
      const auto u = static_cast<unsigned char>(c);
      if (!std::isalnum(u) && c != '-') return false;
      if (!std::isdigit(u)) last_all_digits = false;
    }
    start = end + 1;
  }
  return !last_all_digits;
}

bool IsLocalhostName(std::string_view name) {
  std::string lower(name);
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!lower.empty() && lower.back() == '.') lower.pop_back();
  constexpr std::string_view kLocal = "localhost";
  return lower == kLocal || (lower.size() > kLocal.size() &&
                             lower.compare(lower.size() - kLocal.size() - 1,
                                           std::string::npos, ".localhost") == 0);
}

}  // namespace

Result<std::string> AgentAddress(const std::string& node, const std::string& given,
                                 const std::string& peer_as_seen) {
  std::string peer = peer_as_seen;
  if (peer.rfind("::ffff:", 0) == 0 && peer.find('.') != std::string::npos) {
    peer = peer.substr(7);  // an IPv4 peer on a dual-stack listener
  }
  if (!IsIp(peer)) peer.clear();  // a Unix socket: no address
  if (given.empty()) return peer.empty() ? std::string("127.0.0.1") : peer;

  const std::string from = peer.empty() ? "" : ", connecting from " + peer;
  if (!IsIp(given) && !IsHostName(given)) {
    return InvalidArgument("register: node " + node + " says its address is \"" + given +
                           "\"" + from +
                           "; that is neither an IP address nor a host name: pass "
                           "--address with one, or none to use the address it connects "
                           "from");
  }
  if (IsUnspecified(given)) {
    return InvalidArgument("register: node " + node + " says its address is " + given +
                           from +
                           "; that is no one's address: pass --address with the one "
                           "the other nodes reach it at, or none");
  }
  const bool loopback = IsLoopback(given) || IsLocalhostName(given);
  if (loopback && !peer.empty() && !IsLoopback(peer)) {
    return InvalidArgument("register: node " + node + " says its address is " + given +
                           ", but it connects from " + peer +
                           "; other nodes could not reach it there: pass --address");
  }
  return given;
}

}  // namespace hachi::server
