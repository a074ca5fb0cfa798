// ApiClient: the user commands' typed view of the REST API (docs/api.md), over
// api::HttpClient. It finds the server from --server, $HACHI_SERVER, a local server's
// Unix socket or the default. On the socket the kernel tells the server who we are; over
// TCP it sends `Authorization: Bearer TOKEN` from $HACHI_TOKEN, else the file
// $HACHI_TOKEN_FILE or ~/.config/hachi/token (refused unless mode 0600), else inside a
// job its credential $HACHI_JOB_TOKEN (the job's user while it runs), else nothing
// (anonymous: reads only, and only where the server allows them).
// One per command invocation; not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/http_client.h"
#include "api/protocol.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::cli {

// --server's help, the same in every command that talks to the server.
inline std::string ServerFlagHelp() {
  return "Server URL, or several controllers' as a comma-separated list (docs/ha.md) "
         "(default $HACHI_SERVER or " +
         std::string(api::kDefaultServer) + ")";
}

struct JobView {
  state::JobRecord job;
  std::string diagnosis;  // pending jobs: why, with numbers
};

class ApiClient {
 public:
  static Result<std::unique_ptr<ApiClient>> Connect(const std::string& server_flag);

  Result<std::vector<state::JobId>> Submit(const api::SubmitRequest& r);
  // Every job (finished ones too when asked) as listings show them: without their
  // environments, and a batch script only as a line saying there is one (GET
  // /jobs?brief=1).
  Result<std::vector<state::JobRecord>> Jobs(bool include_finished);
  // wait_from: long-poll until the job leaves this state (or wait_ms passes).
  Result<JobView> Job(state::JobId id, const std::string& wait_from = "",
                      int wait_ms = 0);
  Status JobAction(state::JobId id, const std::string& action);  // cancel, hold, release
  // `id` as the user wrote it: "ID", an array's "A" (every task), "A_T" (task T).
  Status JobAction(const std::string& id, const std::string& action);
  Result<std::vector<state::NodeStatus>> Nodes();
  // drain (with `reason`), resume (`gpu` >= 0: only that unhealthy GPU).
  Status NodeAction(const std::string& node, const std::string& action,
                    const std::string& reason = "", int gpu = -1);
  // Raw JSON bodies, for --json output.
  Result<std::string> Raw(const std::string& path);
  // Any endpoint: `path` after the API prefix ("/tokens"); the body of a 2xx reply.
  Result<std::string> Call(const std::string& method, const std::string& path,
                           const std::string& body = "");

 private:
  explicit ApiClient(std::unique_ptr<api::HttpClient> http) : http_(std::move(http)) {}
  std::unique_ptr<api::HttpClient> http_;
};

// The user running this command: name, uid, gid (from the OS).
struct LocalUser {
  std::string name;
  uint32_t uid = 0;
  uint32_t gid = 0;
};
LocalUser CurrentUser();

// The token this command sends over TCP (see ApiClient): "" when there is none.
Result<std::string> ClientToken();

}  // namespace hachi::cli
