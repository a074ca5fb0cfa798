#include "agent/agent_http.h"

#include <utility>

namespace hachi::agent {

Result<std::string> HttpClientHolder::Call(std::string_view method,
                                           const std::string& path,
                                           const std::string& body, int timeout_ms) {
  api::HttpClient* client = nullptr;
  {
    MutexLock lock(&mu_);
    if (aborted_) return Unavailable("agent stopping");
    if (!client_) {
      Result<std::unique_ptr<api::HttpClient>> c = api::HttpClient::Create(server_);
      if (!c.ok()) return c.status();
      // What opens the server's /agents/* endpoints (server/auth.h).
      (*c)->SetHeader(api::kClusterSecretHeader, cluster_secret_);
      if (floor_) (*c)->SetEpochFloor(floor_);
      // Several controllers: a call waits a little for a leader, and the agent's own
      // loops (backoff, the lease, the probe of a silent server) do the rest.
      (*c)->SetFailoverWait(2000);
      client_ = std::move(*c);
    }
    client = client_.get();
  }
  Result<std::string> r = client->Call(method, path, body, timeout_ms);
  if (!r.ok() && r.status().code() == StatusCode::kUnavailable) {
    MutexLock lock(&mu_);
    client_.reset();
  }
  return r;
}

void HttpClientHolder::Abort() {
  MutexLock lock(&mu_);
  aborted_ = true;
  if (client_) client_->Abort();
}

}  // namespace hachi::agent
