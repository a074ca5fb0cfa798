// Where the long-running processes find their secrets and certificates (docs/api.md
// "Authentication", docs/cli.md): the cluster secret the server and its agents share,
// and the server's TLS files. Flags win over the config's [auth] table, which wins over
// the defaults. Free functions; thread-compatible (they touch files).
#pragma once

#include <string>

#include "config/cluster_config.h"
#include "core/status.h"

namespace hachi::cli {

// The server's cluster secret: from `flag_file`, else [auth] cluster_secret_file, else
// STATE_DIR/cluster-secret — created there (32 random bytes, hex, mode 0600) when it
// does not exist yet, so `hachi server` and `hachi dev` need no setup. A file given
// explicitly must exist.
Result<std::string> ServerClusterSecret(const std::string& flag_file,
                                        const config::AuthConfig* auth,
                                        const std::string& state_dir);

// An agent's: from `flag_file`, else $HACHI_CLUSTER_SECRET_FILE, else
// /var/lib/hachi/cluster-secret (a server's default on the same machine).
Result<std::string> AgentClusterSecret(const std::string& flag_file);

}  // namespace hachi::cli
