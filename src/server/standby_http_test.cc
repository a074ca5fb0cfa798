// The HTTP face of several controllers (docs/ha.md): a standby answers 503 and names the
// leader; a leader's every reply carries its epoch.
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>

#include "api/ha_headers.h"
#include "api/protocol.h"
#include "server/http_api.h"
#include "server/testing.h"

namespace hachi::server {
namespace {

TEST(StandbyHttp, EveryRequestGets503AndTheLeader) {
  std::string leader = "http://10.0.0.1:8686";
  HttpOptions o;
  o.listen = "127.0.0.1:0";
  o.threads = 2;
  o.leader = [&leader] { return leader; };
  HttpServer standby(nullptr, o);
  ASSERT_TRUE(standby.Start().ok());
  httplib::Client c("127.0.0.1", standby.port());
  for (const auto& [method, path] :
       {std::pair<std::string, std::string>{"GET", "/api/v1/jobs"},
        {"POST", "/api/v1/jobs"},
        {"GET", "/api/v1/agents/n1/work?wait=30"},
        {"GET", "/api/v1/health"},
        {"GET", "/no/such/path"}}) {
    httplib::Result r =
        method == "GET" ? c.Get(path) : c.Post(path, "{}", "application/json");
    ASSERT_TRUE(r) << method << " " << path;
    EXPECT_EQ(r->status, 503) << path;
    EXPECT_EQ(r->get_header_value(api::kStandbyHeader), "1");
    EXPECT_EQ(r->get_header_value(api::kLeaderHeader), "http://10.0.0.1:8686");
    EXPECT_NE(r->body.find("the leader is at http://10.0.0.1:8686"), std::string::npos)
        << r->body;
    EXPECT_FALSE(r->has_header(api::kEpochHeader));
  }
  leader.clear();  // a takeover under way: no leader to name
  httplib::Result r = c.Get("/api/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_FALSE(r->has_header(api::kLeaderHeader));
  EXPECT_NE(r->body.find("no leader holds the lease"), std::string::npos) << r->body;
  standby.Stop();
}

TEST(StandbyHttp, ALeadersRepliesCarryItsEpoch) {
  std::unique_ptr<Controller> controller = testing::RunningController("n1");
  ASSERT_TRUE(controller != nullptr);
  HttpOptions o;
  o.listen = "127.0.0.1:0";
  o.threads = 2;
  o.epoch = 42;
  HttpServer http(controller.get(), o);
  ASSERT_TRUE(http.Start().ok());
  httplib::Client c("127.0.0.1", http.port());
  for (const std::string path : {"/api/v1/health", "/api/v1/no-such-route"}) {
    httplib::Result r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->get_header_value(api::kEpochHeader), "42") << path;
    EXPECT_FALSE(r->has_header(api::kStandbyHeader));
  }
  controller->Stop();
  http.Stop();
}

}  // namespace
}  // namespace hachi::server
