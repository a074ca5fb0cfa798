#include "server/browser_host.h"

#include <arpa/inet.h>
#include <httplib.h>

#include "core/strings.h"

namespace hachi::server {

bool FromBrowser(const httplib::Request& req) {
  for (const char* h : {"Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest"}) {
    if (req.has_header(h)) return true;
  }
  return false;
}

bool HostNamesServer(std::string_view host_header,
                     const std::vector<std::string>& names) {
  std::string_view host = Trim(host_header);
  if (!host.empty() && host.front() == '[') {
    // An IPv6 literal, with or without a port after the bracket.
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    const std::string literal(host.substr(1, close - 1));
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    in6_addr a6;
    return inet_pton(AF_INET6, literal.c_str(), &a6) == 1;
  }
  if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  std::string name = ToLower(host);
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (name.empty()) return false;
  // A literal address is no one's name: a page reaching it has that address as its
  // origin, not another site's.
  in_addr a4;
  if (inet_pton(AF_INET, name.c_str(), &a4) == 1) return true;
  if (name == "localhost" || name.ends_with(".localhost")) return true;
  for (const std::string& n : names) {
    std::string want = ToLower(n);
    if (!want.empty() && want.back() == '.') want.pop_back();
    if (!want.empty() && want == name) return true;
  }
  return false;
}

}  // namespace hachi::server
