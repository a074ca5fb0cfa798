#include "server/auth.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstring>

#include "core/secret.h"
#include "core/sha256.h"
#include "core/strings.h"

namespace hachi::server {

bool IsLoopback(std::string_view address) {
  std::string a(address);
  if (a.rfind("::ffff:", 0) == 0) a = a.substr(7);
  in_addr v4{};
  if (::inet_pton(AF_INET, a.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, a.c_str(), &v6) == 1) {
    return std::memcmp(&v6, &in6addr_loopback, sizeof v6) == 0;
  }
  return false;
}

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size()) return {};
  // The scheme is case-insensitive (RFC 7235).
  for (size_t i = 0; i < kBearer.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kBearer[i]))) {
      return {};
    }
  }
  std::string_view t = authorization.substr(kBearer.size());
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\r')) t.remove_suffix(1);
  return t;
}

Result<std::string> NewToken(const std::string& id) {
  Result<std::string> secret = RandomHex(32);
  if (!secret.ok()) return secret.status();
  return std::string(kTokenPrefix) + id + "_" + *secret;
}

std::string_view TokenId(std::string_view token) {
  if (token.size() > 200 || token.substr(0, kTokenPrefix.size()) != kTokenPrefix)
    return {};
  std::string_view rest = token.substr(kTokenPrefix.size());
  const size_t sep = rest.find('_');
  if (sep == std::string_view::npos || sep == 0) return {};
  return rest.substr(0, sep);
}

std::string JobCredential(std::string_view key, state::JobId job, Time start) {
  const std::string run = std::to_string(job) + "." + std::to_string(start);
  return std::string(kJobCredentialPrefix) + std::to_string(job) + "_" +
         std::to_string(start) + "_" + HmacSha256Hex(key, run);
}

bool CheckJobCredential(std::string_view key, std::string_view token, state::JobId* job,
                        Time* start) {
  if (key.empty() || token.size() > 200 ||
      token.substr(0, kJobCredentialPrefix.size()) != kJobCredentialPrefix) {
    return false;
  }
  std::string_view rest = token.substr(kJobCredentialPrefix.size());
  auto number = [&rest](int64_t* out) {
    const size_t sep = rest.find('_');
    if (sep == 0 || sep == std::string_view::npos || sep > 18) return false;
    int64_t v = 0;
    for (char ch : rest.substr(0, sep)) {
      if (ch < '0' || ch > '9') return false;
      v = v * 10 + (ch - '0');
    }
    *out = v;
    rest = rest.substr(sep + 1);
    return true;
  };
  int64_t j = 0, s = 0;
  if (!number(&j) || !number(&s) || j <= 0) return false;
  const std::string want = JobCredential(key, j, s);
  if (!SecretEquals(want, token)) return false;
  *job = j;
  *start = s;
  return true;
}

void RedactJobDetails(state::JobRecord* job) {
  state::JobSpec& spec = job->spec;
  // Arguments hold passwords as often as the environment does (`--db-password=...`).
  // A command job keeps its command's base name — the default job name, shown anyway —
  // so that queue displays still say what runs; a batch script's argv is all arguments.
  std::vector<std::string> argv;
  size_t hidden = spec.argv().size();
  if (spec.script().empty() && !spec.argv().empty()) {
    argv.push_back(BaseName(spec.argv()[0]));
    --hidden;
  }
  if (hidden > 0) {
    argv.push_back("(" + std::to_string(hidden) +
                   (hidden == 1 ? " argument" : " arguments") + " not shown)");
  }
  spec.SetPayload(
      {.script = spec.script().empty()
                     ? ""
                     : "# not shown: only the job's owner and admins see its script\n",
       .env = {},
       .argv = std::move(argv)});
  // What its GPUs, CPUs and memory did, as GET /jobs/ID/usage refuses it to others.
  job->usage = {};
}

void RedactStrayProcesses(state::NodeStatus* node) {
  for (state::StrayGpuProcess& p : node->stray_processes) {
    // The command line as /proc has it: its first word's base name says what runs.
    const size_t space = p.command.find(' ');
    p.command = BaseName(p.command.substr(0, space)) +
                (space != std::string::npos ? " (arguments not shown)" : "");
  }
}

}  // namespace hachi::server
