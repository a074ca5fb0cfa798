// [auth] and [[account]] (docs/config.md): who administers the cluster, who reads
// without a token, the names browsers reach the server by, TLS files, and account
// membership.
#include <set>

#include "config/reader.h"

namespace hachi::config::internal {

namespace {

// A list of user names, none twice.
Result<std::vector<std::string>> UserNames(const Reader& r, const toml::node& n,
                                           const std::string& path) {
  Result<std::vector<std::string>> names = r.Strings(n, path);
  if (!names.ok()) return names.status();
  std::set<std::string> seen;
  for (const std::string& name : *names) {
    if (name.empty() || name.size() > 64 ||
        name.find_first_of(" \t/:") != std::string::npos) {
      return r.Error(n, path, Quoted(name) + " is not a user name");
    }
    if (!seen.insert(name).second)
      return r.Error(n, path, Quoted(name) + " is listed twice");
  }
  return names;
}

}  // namespace

Status ReadAuth(const Reader& r, const toml::node& n, AuthConfig* out) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, "auth"));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, "auth",
                                    {"admins", "anonymous_read", "tls_cert", "tls_key",
                                     "cluster_secret_file", "browser_hosts"}));
  if (const toml::node* a = t->get("admins")) {
    CONFIG_ASSIGN_OR_RETURN(out->admins, UserNames(r, *a, "auth.admins"));
  }
  HACHI_RETURN_IF_ERROR(Optional(
      *t, "auth", "anonymous_read",
      [&](const toml::node& v, const std::string& k) -> Result<std::string> {
        Result<std::string> s = r.String(v, k);
        if (s.ok() && *s != "localhost" && *s != "none" && *s != "all") {
          return r.Error(v, k, Quoted(*s) + " is not one of localhost, none, all");
        }
        return s;
      },
      &out->anonymous_read));
  auto string = [&](const toml::node& v, const std::string& k) { return r.String(v, k); };
  HACHI_RETURN_IF_ERROR(Optional(*t, "auth", "tls_cert", string, &out->tls_cert));
  HACHI_RETURN_IF_ERROR(Optional(*t, "auth", "tls_key", string, &out->tls_key));
  if (out->tls_cert.empty() != out->tls_key.empty()) {
    return r.Error(n, "auth", "tls_cert and tls_key go together");
  }
  HACHI_RETURN_IF_ERROR(
      Optional(*t, "auth", "cluster_secret_file", string, &out->cluster_secret_file));
  if (const toml::node* h = t->get("browser_hosts")) {
    CONFIG_ASSIGN_OR_RETURN(out->browser_hosts, r.Strings(*h, "auth.browser_hosts"));
    for (const std::string& name : out->browser_hosts) {
      // A host name as a browser sends it in Host: letters, digits, '-', '.'; no port.
      if (name.empty() || name.size() > 253 ||
          name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "0123456789-.") != std::string::npos) {
        return r.Error(*h, "auth.browser_hosts", Quoted(name) + " is not a host name");
      }
    }
  }
  return Status::Ok();
}

Result<AccountConfig> ReadAccount(const Reader& r, const toml::node& n,
                                  const std::string& path) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, path));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, path, {"name", "members"}));
  AccountConfig a;
  const toml::node* name = t->get("name");
  if (name == nullptr) return r.Error(n, path, "needs a name");
  CONFIG_ASSIGN_OR_RETURN(a.name, r.Name(*name, Join(path, "name")));
  const toml::node* members = t->get("members");
  if (members == nullptr) return r.Error(n, path, "needs members (a list of user names)");
  CONFIG_ASSIGN_OR_RETURN(a.members, UserNames(r, *members, Join(path, "members")));
  return a;
}

}  // namespace hachi::config::internal
