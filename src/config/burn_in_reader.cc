// [burn_in] and the node overrides' burn_in lists (docs/burn-in.md): which
// checks a node must pass before it takes jobs.
#include <algorithm>

#include "config/reader.h"

namespace hachi::config {

Status CheckBurnInCheck(const std::string& check) {
  const std::string_view text = Trim(check);
  if (text.empty()) return InvalidArgument("a burn-in check is empty");
  const std::string_view word = text.substr(0, text.find_first_of(" \t"));
  if (word == "doctor" || word == "commtest" || word.front() == '/') {
    return Status::Ok();
  }
  return InvalidArgument("'" + std::string(text) +
                         "' is not a burn-in check: \"doctor\" or \"commtest\" (with "
                         "their options), or a site script's absolute path");
}

std::vector<std::string> BurnInChecksFor(const ClusterConfig& config,
                                         const std::string& node, bool simulated) {
  // The last override that names the node wins, as for the other per-node settings.
  for (auto it = config.node_overrides.rbegin(); it != config.node_overrides.rend();
       ++it) {
    if (!it->burn_in) continue;
    const std::vector<std::string>& names = it->nodes.names;
    if (it->nodes.all || std::find(names.begin(), names.end(), node) != names.end()) {
      return *it->burn_in;
    }
  }
  if (simulated && !config.burn_in.simulated) return {};
  return config.burn_in.checks;
}

namespace internal {

Result<std::vector<std::string>> ReadBurnInChecks(const Reader& r, const toml::node& n,
                                                  const std::string& path) {
  Result<std::vector<std::string>> checks = r.Strings(n, path);
  if (!checks.ok()) return checks.status();
  for (std::string& c : *checks) {
    Status ok = CheckBurnInCheck(c);
    if (!ok.ok()) return r.Error(n, path, ok.message());
    c = std::string(Trim(c));
  }
  return checks;
}

Status ReadBurnIn(const Reader& r, const toml::node& n, BurnInConfig* out) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, "burn_in"));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, "burn_in", {"checks", "timeout", "simulated"}));
  if (const toml::node* c = t->get("checks")) {
    CONFIG_ASSIGN_OR_RETURN(out->checks, ReadBurnInChecks(r, *c, "burn_in.checks"));
  }
  HACHI_RETURN_IF_ERROR(Optional(
      *t, "burn_in", "timeout",
      [&](const toml::node& v, const std::string& k) -> Result<Duration> {
        Result<Duration> d = r.DurationOf(v, k);
        if (d.ok() && *d <= 0) return r.Error(v, k, "must be longer than 0s");
        return d;
      },
      &out->timeout));
  HACHI_RETURN_IF_ERROR(Optional(
      *t, "burn_in", "simulated",
      [&](const toml::node& v, const std::string& k) { return r.Bool(v, k); },
      &out->simulated));
  return Status::Ok();
}

}  // namespace internal
}  // namespace hachi::config
