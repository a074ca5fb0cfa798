// HttpClient with several controllers (docs/ha.md): standbys followed to the leader they
// name, only within the list; dead addresses skipped; a deposed leader's reply refused by
// the epoch floor; a POST never sent twice; rounds and pauses while no one leads.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/epoch_floor.h"
#include "api/ha_headers.h"
#include "api/http_client.h"

namespace hachi::api {
namespace {

// One fake controller on 127.0.0.1: a leader of `epoch` (0: sends none) or a standby
// naming `leader`.
class FakeServer {
 public:
  FakeServer() {
    server_.Get("/x", [this](const httplib::Request&, httplib::Response& res) {
      ++gets;
      Answer(res);
    });
    // What the client asks first, of every address at once: who leads.
    server_.Get("/api/v1/health",
                [this](const httplib::Request&, httplib::Response& res) { Answer(res); });
    server_.Post("/x", [this](const httplib::Request&, httplib::Response& res) {
      ++posts;
      ++gets;
      if (stall) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return released_; });
      }
      Answer(res);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::atomic<int> gets{0}, posts{0};
  std::atomic<bool> standby{false}, stall{false};
  std::atomic<int64_t> epoch{0};
  std::string leader;  // set before requests

 private:
  void Answer(httplib::Response& res) {
    if (standby) {
      res.status = 503;
      res.set_header(kStandbyHeader, "1");
      if (!leader.empty()) res.set_header(kLeaderHeader, leader);
      res.set_content(R"({"error":{"code":"unavailable","message":"standby"}})",
                      "application/json");
      return;
    }
    if (epoch > 0) res.set_header(kEpochHeader, std::to_string(epoch.load()));
    res.set_content("{\"from\":\"" + url() + "\"}", "application/json");
  }
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

std::unique_ptr<HttpClient> Client(const std::string& list, int timeout_ms = 2000) {
  Result<std::unique_ptr<HttpClient>> c = HttpClient::Create(list, timeout_ms);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// A port nothing listens on: bound (never listened on), then closed.
std::string DeadUrl() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

TEST(HttpFailover, AStandbySendsTheClientToTheLeaderItNames) {
  FakeServer a, b;
  a.standby = true;
  b.epoch = 3;
  a.leader = b.url();
  auto c = Client(a.url() + "," + b.url());
  // Asked first who leads: straight to b.
  ASSERT_TRUE(c->Call("GET", "/x").ok());
  EXPECT_EQ(a.gets, 0);
  EXPECT_EQ(b.gets, 1);
  // A takeover: b is a standby now, naming a; the client follows.
  b.standby = true;
  b.leader = a.url();
  a.standby = false;
  a.epoch = 4;
  Result<std::string> r = c->Call("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->find(a.url()), std::string::npos);
  EXPECT_EQ(b.gets, 2);
  EXPECT_EQ(a.gets, 1);
  // The leader is remembered: the next request goes straight there.
  ASSERT_TRUE(c->Call("GET", "/x").ok());
  EXPECT_EQ(b.gets, 2);
  EXPECT_EQ(a.gets, 2);
}

TEST(HttpFailover, AStandbyCannotSendTheClientOutsideItsList) {
  FakeServer elsewhere, standby, leader;
  standby.standby = true;
  standby.leader = elsewhere.url();  // not in the list
  auto c = Client(standby.url() + "," + leader.url());
  Result<std::string> r = c->Call("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(elsewhere.gets, 0);
  EXPECT_EQ(leader.gets, 1);
}

TEST(HttpFailover, ADeadAddressIsSkipped) {
  FakeServer leader;
  auto c = Client(DeadUrl() + ", " + leader.url());
  Result<std::string> r = c->Call("POST", "/x", "{}");  // nothing was sent: may go on
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(leader.posts, 1);
}

TEST(HttpFailover, WithNoLeaderItGoesRoundAgainAndThenNamesEveryAddress) {
  FakeServer a, b;
  a.standby = true;
  b.standby = true;
  auto c = Client(a.url() + "," + b.url());
  std::vector<int> pauses;
  c->SetFailoverWait(1000, [&pauses](int ms) { pauses.push_back(ms); });
  Result<std::string> r = c->Call("GET", "/x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(pauses, (std::vector<int>{100, 200, 400, 800}));
  EXPECT_NE(r.status().message().find(a.url() + ": a standby, no leader yet"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find(b.url()), std::string::npos);
  // Asked who leads at each round (their health checks); the request itself goes out
  // once, at the end, to each.
  EXPECT_EQ(a.gets, 1);
}

TEST(HttpFailover, ALeaderFoundWhileWaitingAnswers) {
  FakeServer a, b;
  a.standby = true;
  b.standby = true;
  auto c = Client(a.url() + "," + b.url());
  // The takeover happens during the second pause.
  c->SetFailoverWait(20000, [&](int ms) {
    if (ms == 200) {
      b.standby = false;
      b.epoch = 2;
    }
  });
  EXPECT_TRUE(c->Call("GET", "/x").ok());
}

TEST(HttpFailover, ADeposedLeadersReplyIsRefusedByTheFloor) {
  FakeServer old_leader, new_leader;
  old_leader.epoch = 4;
  new_leader.epoch = 5;
  Result<std::shared_ptr<EpochFloor>> floor = EpochFloor::Open("");
  ASSERT_TRUE(floor.ok());
  auto c = Client(old_leader.url() + "," + new_leader.url());
  c->SetEpochFloor(*floor);
  ASSERT_TRUE((*floor)->Admit(5));
  Result<std::string> r = c->Call("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->find(new_leader.url()), std::string::npos);
  EXPECT_EQ(old_leader.gets, 0);  // its health check said epoch 4: never asked
  // A single deposed address: refused, and said so.
  auto alone = Client(old_leader.url());
  alone->SetEpochFloor(*floor);
  Result<std::string> refused = alone->Call("GET", "/x");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("a deposed leader (epoch 4; epoch 5 already"),
            std::string::npos)
      << refused.status().message();
  // A higher epoch raises the floor.
  old_leader.epoch = 9;
  ASSERT_TRUE(alone->Call("GET", "/x").ok());
  EXPECT_EQ((*floor)->value(), 9);
}

TEST(HttpFailover, APostThatWasSentIsNeverSentTwice) {
  FakeServer stalled, other;
  stalled.stall = true;
  auto c = Client(stalled.url() + "," + other.url(), /*timeout_ms=*/300);
  Result<std::string> r = c->Call("POST", "/x", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("whether it was done is unknown"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(stalled.posts, 1);
  EXPECT_EQ(other.posts, 0);
}

TEST(HttpFailover, ABadElementOfTheListIsNamed) {
  Result<std::unique_ptr<HttpClient>> c =
      HttpClient::Create("http://127.0.0.1:1,http://nowhere", 1000);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'http://nowhere'"), std::string::npos)
      << c.status().message();
}

TEST(EpochFloor, KeptInItsFileAndReadBack) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("hachi-epoch-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/epoch";
  {
    Result<std::shared_ptr<EpochFloor>> f = EpochFloor::Open(path);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ((*f)->value(), 0);
    EXPECT_TRUE((*f)->Admit(7));
    EXPECT_FALSE((*f)->Admit(6));
  }
  Result<std::shared_ptr<EpochFloor>> again = EpochFloor::Open(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->value(), 7);
  EXPECT_FALSE((*again)->Admit(6));
  std::ofstream(path) << "seven";
  Result<std::shared_ptr<EpochFloor>> bad = EpochFloor::Open(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hachi::api
