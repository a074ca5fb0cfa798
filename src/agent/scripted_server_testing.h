// ScriptedServer: a fake server for agent tests (agent/daemon_*_test.cc) that answers
// an agent's calls with what the test gives it — work to poll, a lease, a hang, an epoch,
// a standby's 503 — and records what the agent sent. Tests only.
//
// Thread-safety: every method may be called from any thread (one mutex), beside the
// server's own threads.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/ha_headers.h"
#include "api/protocol.h"
#include "api/protocol_json.h"
#include "core/testing/wait_for.h"

namespace hachi::agent {

class ScriptedServer {
 public:
  ScriptedServer() {
    const std::string p = api::kApiPrefix;
    server_.Post(p + "/agents/register", [this](const httplib::Request& req,
                                                httplib::Response& res) {
      WhileHung();
      std::lock_guard<std::mutex> lock(mu_);
      registrations_.push_back(*api::AgentRegistrationFromJson(req.body));
      res.set_content(lease_s_ > 0
                          ? "{\"ok\":true,\"lease_s\":" + std::to_string(lease_s_) + "}"
                          : std::string("{\"ok\":true}"),
                      "application/json");
    });
    server_.Get(p + R"(/agents/([^/]+)/work)", [this](const httplib::Request& req,
                                                      httplib::Response& res) {
      WhileHung();
      api::AgentWork w;
      {
        {
          std::lock_guard<std::mutex> lock(mu_);
          acks_.push_back(req.has_param("ack") ? req.get_param_value("ack") : "none");
        }
        // A short long poll: answered when work comes, else empty in 10 ms.
        std::unique_lock<std::mutex> lock(mu_);
        work_sent_.wait_for(lock, std::chrono::milliseconds(10),
                            [&] { return !work_.empty(); });
        if (!work_.empty()) {
          w = work_.front();
          work_.pop_front();
        }
        ++polls_;
      }
      res.set_content(api::AgentWorkToJson(w), "application/json");
    });
    server_.Post(p + R"(/agents/([^/]+)/exits)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   WhileHung();
                   Result<std::vector<api::JobExit>> r = api::JobExitsFromJson(req.body);
                   if (!r.ok()) {
                     res.status = 400;
                     return;
                   }
                   std::lock_guard<std::mutex> lock(mu_);
                   for (size_t i = 0; i < r->size(); ++i) exits_.push_back((*r)[i]);
                   res.set_content("{\"ok\":true}", "application/json");
                 });
    server_.Post(p + R"(/agents/([^/]+)/health)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Result<api::AgentHealth> h = api::AgentHealthFromJson(req.body);
                   if (!h.ok()) {
                     res.status = 400;
                     return;
                   }
                   std::lock_guard<std::mutex> lock(mu_);
                   health_.push_back(*h);
                   res.set_content("{\"ok\":true}", "application/json");
                 });
    // Several controllers (api/ha_headers.h): a standby answers everything alike; a
    // leader's every reply carries its epoch.
    server_.set_pre_routing_handler(
        [this](const httplib::Request&, httplib::Response& res) {
          std::lock_guard<std::mutex> lock(mu_);
          if (!standby_) return httplib::Server::HandlerResponse::Unhandled;
          ++standby_answers_;
          res.status = 503;
          res.set_header(api::kStandbyHeader, "1");
          if (!leader_.empty()) res.set_header(api::kLeaderHeader, leader_);
          res.set_content(R"({"error":{"code":"unavailable","message":"a standby"}})",
                          "application/json");
          return httplib::Server::HandlerResponse::Handled;
        });
    server_.set_post_routing_handler(
        [this](const httplib::Request&, httplib::Response& res) {
          std::lock_guard<std::mutex> lock(mu_);
          if (epoch_ > 0 && !standby_)
            res.set_header(api::kEpochHeader, std::to_string(epoch_));
        });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    WaitFor([&] { return server_.is_running(); });
  }
  ~ScriptedServer() {
    Hang(false);
    Close();
  }
  // Stops listening, as a killed server: its address refuses connections.
  void Close() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The lease its register reply gives (0: none, as an older server's).
  void SetLease(int seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    lease_s_ = seconds;
  }
  // The epoch every reply carries from now on (0: none, a server without a lease).
  void SetEpoch(int64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    epoch_ = epoch;
  }
  // A standby from now on (503 to every request), naming `leader` ("": none).
  void SetStandby(bool standby, std::string leader = "") {
    std::lock_guard<std::mutex> lock(mu_);
    standby_ = standby;
    leader_ = std::move(leader);
  }
  int standby_answers() const {
    std::lock_guard<std::mutex> lock(mu_);
    return standby_answers_;
  }
  // While hung, every request waits (a dead link whose TCP connection stays open).
  void Hang(bool hung) {
    std::lock_guard<std::mutex> lock(mu_);
    hung_ = hung;
    unhung_.notify_all();
  }
  int hung_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return hung_calls_;
  }
  void Send(api::AgentWork w) {
    std::lock_guard<std::mutex> lock(mu_);
    work_.push_back(std::move(w));
    work_sent_.notify_all();
  }
  // Work polls answered so far. The agent handles a poll's work before it polls again:
  // two more answered after a Send means the work sent was handled.
  int polls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return polls_;
  }
  std::vector<api::JobExit> exits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return exits_;
  }
  // The `ack` of every work poll, in order ("none" when absent).
  std::vector<std::string> acks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acks_;
  }
  std::vector<api::AgentRegistration> registrations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  std::vector<api::AgentHealth> health() const {
    std::lock_guard<std::mutex> lock(mu_);
    return health_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::deque<api::AgentWork> work_;
  std::condition_variable work_sent_;
  int polls_ = 0;
  std::vector<api::JobExit> exits_;
  std::vector<std::string> acks_;
  std::vector<api::AgentRegistration> registrations_;
  std::vector<api::AgentHealth> health_;
  int lease_s_ = 0;
  int64_t epoch_ = 0;
  bool standby_ = false;
  std::string leader_;
  int standby_answers_ = 0;
  bool hung_ = false;
  int hung_calls_ = 0;  // requests waiting now
  std::condition_variable unhung_;

  void WhileHung() {
    std::unique_lock<std::mutex> lock(mu_);
    ++hung_calls_;
    unhung_.wait_for(lock, std::chrono::seconds(30), [&] { return !hung_; });
    --hung_calls_;
  }
};

}  // namespace hachi::agent
