#include "cli/auth_files.h"

#include <sys/stat.h>

#include <cstdlib>

#include "core/secret.h"

namespace hachi::cli {

Result<std::string> ServerClusterSecret(const std::string& flag_file,
                                        const config::AuthConfig* auth,
                                        const std::string& state_dir) {
  std::string path = flag_file;
  if (path.empty() && auth != nullptr) path = auth->cluster_secret_file;
  if (!path.empty()) {
    Result<std::string> s = ReadSecretFile(path);
    if (!s.ok())
      return Status(s.status().code(), "cluster secret: " + s.status().message());
    return s;
  }
  path = state_dir + "/cluster-secret";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    Result<std::string> fresh = RandomHex(32);
    if (!fresh.ok()) return fresh.status();
    // Another process may have made it meanwhile: then read theirs.
    if (WriteSecretFile(path, *fresh).ok()) return fresh;
  }
  Result<std::string> s = ReadSecretFile(path);
  if (!s.ok())
    return Status(s.status().code(), "cluster secret: " + s.status().message());
  return s;
}

Result<std::string> AgentClusterSecret(const std::string& flag_file) {
  std::string path = flag_file;
  if (path.empty()) {
    const char* env = std::getenv("HACHI_CLUSTER_SECRET_FILE");
    path = env != nullptr && *env != '\0' ? env : "/var/lib/hachi/cluster-secret";
  }
  Result<std::string> s = ReadSecretFile(path);
  if (!s.ok()) {
    return Status(s.status().code(),
                  "cluster secret: " + s.status().message() +
                      " (the server's STATE_DIR/cluster-secret, copied to this machine; "
                      "--cluster-secret-file)");
  }
  return s;
}

}  // namespace hachi::cli
