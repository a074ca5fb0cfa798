// HttpClientHolder: the agent's connection to the server for one thread's calls (the
// work poll, the reports, the steps' reports). Keeps an api::HttpClient and makes a new
// one after a connection error; every call carries the cluster secret.
//
// Thread-safety: Call from one thread at a time; Abort from any thread, at any time (a
// stopping agent ends a long poll in progress), after which every Call fails at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "api/epoch_floor.h"
#include "api/http_client.h"
#include "core/mutex.h"
#include "core/status.h"

namespace hachi::agent {

class HttpClientHolder {
 public:
  // `floor`: the agent's epoch floor (api/epoch_floor.h), shared by its clients; null:
  // none.
  HttpClientHolder(std::string server, std::string cluster_secret,
                   std::shared_ptr<api::EpochFloor> floor = nullptr)
      : server_(std::move(server)),
        cluster_secret_(std::move(cluster_secret)),
        floor_(std::move(floor)) {}
  HttpClientHolder(const HttpClientHolder&) = delete;
  HttpClientHolder& operator=(const HttpClientHolder&) = delete;

  Result<std::string> Call(std::string_view method, const std::string& path,
                           const std::string& body, int timeout_ms) EXCLUDES(mu_);
  void Abort() EXCLUDES(mu_);

 private:
  const std::string server_;
  const std::string cluster_secret_;
  const std::shared_ptr<api::EpochFloor> floor_;
  Mutex mu_;
  // Replaced after errors; its Abort may run while Call waits on it (outside mu_).
  std::unique_ptr<api::HttpClient> client_ GUARDED_BY(mu_);
  bool aborted_ GUARDED_BY(mu_) = false;
};

}  // namespace hachi::agent
