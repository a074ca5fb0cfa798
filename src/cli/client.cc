#include "cli/client.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/protocol_json.h"
#include "api/record_json_nlohmann.h"
#include "api/submit_checks.h"
#include "core/secret.h"

namespace hachi::cli {

using nlohmann::json;

LocalUser CurrentUser() {
  LocalUser u;
  u.uid = ::getuid();
  u.gid = ::getgid();
  if (const passwd* pw = ::getpwuid(u.uid)) u.name = pw->pw_name;
  if (u.name.empty()) u.name = std::to_string(u.uid);
  return u;
}

namespace {

Result<json> ParseBody(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Internal("the server sent a reply that is not a JSON object");
  }
  return j;
}

}  // namespace

Result<std::string> ClientToken() {
  if (const char* env = std::getenv("HACHI_TOKEN"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  // Inside a job: the run's credential (server/auth.h), when the user has no token.
  const char* job = std::getenv("HACHI_JOB_TOKEN");
  const std::string job_token = job != nullptr ? job : "";
  std::string path;
  if (const char* file = std::getenv("HACHI_TOKEN_FILE");
      file != nullptr && *file != '\0') {
    path = file;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    path = std::string(home) + "/.config/hachi/token";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return job_token;  // none: anonymous
  } else {
    return job_token;
  }
  Result<std::string> token = ReadSecretFile(path);
  if (!token.ok())
    return Status(token.status().code(), "token file: " + token.status().message());
  return token;
}

Result<std::unique_ptr<ApiClient>> ApiClient::Connect(const std::string& server_flag) {
  const std::string address = api::ResolveServer(server_flag);
  Result<std::unique_ptr<api::HttpClient>> http = api::HttpClient::Create(address);
  if (!http.ok()) return http.status();
  // On the Unix socket the kernel says who we are; a token would only be ignored there.
  // A list of several controllers sends it when any of them is reached over TCP.
  const std::vector<std::string> servers = api::SplitServerList(address);
  if (std::any_of(servers.begin(), servers.end(),
                  [](const std::string& a) { return a.rfind("unix:", 0) != 0; })) {
    Result<std::string> token = ClientToken();
    if (!token.ok()) return token.status();
    if (!token->empty()) (*http)->SetHeader("Authorization", "Bearer " + *token);
  }
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(*http)));
}

Result<std::string> ApiClient::Call(const std::string& method, const std::string& path,
                                    const std::string& body) {
  return http_->Call(method, std::string(api::kApiPrefix) + path, body);
}

Result<std::vector<state::JobId>> ApiClient::Submit(const api::SubmitRequest& r) {
  // The server's own checks (api/submit_checks.h), here before anything is sent: the
  // same refusal in the same words, without a round trip.
  HACHI_RETURN_IF_ERROR(api::CheckSubmitRequest(r));
  // An idempotency key per submit (docs/api.md, "Submit idempotency"): when the reply is
  // lost the same request is sent again, and the server answers it with the first
  // one's ids instead of making a second job. Twice more at most, after 0.3 s and 1 s.
  api::SubmitRequest keyed = r;
  if (keyed.idempotency_key.empty()) {
    Result<std::string> key = RandomHex(16);
    if (!key.ok()) return key.status();
    keyed.idempotency_key = *key;
  }
  const std::string request = api::SubmitRequestToJson(keyed);
  const std::string path = std::string(api::kApiPrefix) + "/jobs";
  Result<std::string> body = http_->Call("POST", path, request);
  for (int retry : {300, 1000}) {
    if (body.ok() || body.status().code() != StatusCode::kUnavailable) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(retry));
    body = http_->Call("POST", path, request);
  }
  if (!body.ok()) return body.status();
  Result<json> j = ParseBody(*body);
  if (!j.ok()) return j.status();
  std::vector<state::JobId> ids;
  if (!j->contains("job_ids") || !(*j)["job_ids"].is_array()) {
    return Internal("submit: the reply has no job_ids");
  }
  for (const json& id : (*j)["job_ids"]) ids.push_back(id.get<state::JobId>());
  return ids;
}

Result<std::vector<state::JobRecord>> ApiClient::Jobs(bool include_finished) {
  // Page by page: the server builds one page's reply at a time, not one of every job
  // it ever ran.
  constexpr int kPage = 5000;
  std::vector<state::JobRecord> out;
  state::JobId after = 0;
  for (;;) {
    Result<std::string> body = http_->Call(
        "GET", std::string(api::kApiPrefix) + "/jobs?limit=" + std::to_string(kPage) +
                   "&after=" + std::to_string(after) + "&brief=1" +
                   (include_finished ? "&all=1" : ""));
    if (!body.ok()) return body.status();
    Result<json> j = ParseBody(*body);
    if (!j.ok()) return j.status();
    if (!j->contains("jobs") || !(*j)["jobs"].is_array()) {
      return Internal("jobs: the reply has no jobs list");
    }
    for (const json& r : (*j)["jobs"]) {
      state::JobRecord rec;
      HACHI_RETURN_IF_ERROR(api::FromJson(r, &rec));
      out.push_back(std::move(rec));
    }
    auto next = j->find("next_after");
    if (next == j->end() || !next->is_number_integer()) return out;
    const state::JobId n = next->get<state::JobId>();
    if (n <= after) return Internal("jobs: the server's next page does not move on");
    after = n;
  }
}

Result<JobView> ApiClient::Job(state::JobId id, const std::string& wait_from,
                               int wait_ms) {
  std::string path = std::string(api::kApiPrefix) + "/jobs/" + std::to_string(id);
  if (!wait_from.empty()) {
    path += "?wait_from=" + wait_from + "&wait_ms=" + std::to_string(wait_ms);
  }
  Result<std::string> body = http_->Call("GET", path, "", wait_ms + 30000);
  if (!body.ok()) return body.status();
  Result<json> j = ParseBody(*body);
  if (!j.ok()) return j.status();
  JobView v;
  HACHI_RETURN_IF_ERROR(api::FromJson((*j)["job"], &v.job));
  if (j->contains("diagnosis") && (*j)["diagnosis"].is_string()) {
    v.diagnosis = (*j)["diagnosis"].get<std::string>();
  }
  return v;
}

Status ApiClient::JobAction(state::JobId id, const std::string& action) {
  return JobAction(std::to_string(id), action);
}

Status ApiClient::JobAction(const std::string& id, const std::string& action) {
  Result<std::string> r =
      http_->Call("POST", std::string(api::kApiPrefix) + "/jobs/" + id + "/" + action);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<state::NodeStatus>> ApiClient::Nodes() {
  Result<std::string> body = http_->Call("GET", std::string(api::kApiPrefix) + "/nodes");
  if (!body.ok()) return body.status();
  Result<json> j = ParseBody(*body);
  if (!j.ok()) return j.status();
  std::vector<state::NodeStatus> out;
  for (const json& n : (*j)["nodes"]) {
    state::NodeStatus st;
    HACHI_RETURN_IF_ERROR(api::FromJson(n, &st));
    out.push_back(std::move(st));
  }
  return out;
}

Status ApiClient::NodeAction(const std::string& node, const std::string& action,
                             const std::string& reason, int gpu) {
  const std::string body = action == "drain" ? json{{"reason", reason}}.dump()
                           : gpu >= 0        ? json{{"gpu", gpu}}.dump()
                                             : "";
  Result<std::string> r = http_->Call(
      "POST", std::string(api::kApiPrefix) + "/nodes/" + node + "/" + action, body);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::string> ApiClient::Raw(const std::string& path) {
  return http_->Call("GET", std::string(api::kApiPrefix) + path);
}

}  // namespace hachi::cli
