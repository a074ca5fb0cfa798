// HttpClient with several controllers (docs/ha.md): standbys followed to the leader they
// name, only within the list; dead addresses skipped; a deposed leader's reply refused by
// the epoch floor; a POST never sent twice; rounds and pauses while no one leads.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
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
#include "core/clock.h"
#include "core/testing/wait_for.h"

namespace hachi::api {
namespace {

// One fake controller on 127.0.0.1: a leader of `epoch` (0: sends none) or a standby
// naming `leader`.
class FakeServer {
 public:
  FakeServer() {
    server_.Get("/x", [this](const httplib::Request&, httplib::Response& res) {
      ++gets;
      Stall();
      Answer(res);
    });
    // What the client asks first, of every address at once: who leads.
    server_.Get("/api/v1/health",
                [this](const httplib::Request&, httplib::Response& res) {
                  ++healths;
                  Answer(res);
                });
    server_.Post("/x", [this](const httplib::Request&, httplib::Response& res) {
      ++posts;
      ++gets;
      Stall();
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

  std::atomic<int> gets{0}, posts{0}, healths{0};
  std::atomic<bool> standby{false}, stall{false};
  std::atomic<int64_t> epoch{0};
  std::string leader;  // set before requests

 private:
  // While `stall`: no answer until the server goes (the client's read times out).
  void Stall() {
    if (!stall) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return released_; });
  }
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
  // A takeover: b is a standby now, naming a (in another form of its address); the
  // client follows.
  b.standby = true;
  b.leader = "127.0.0.1:" + a.url().substr(a.url().rfind(':') + 1) + "/";
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
  FakeServer elsewhere, a, b;
  a.epoch = 2;
  b.standby = true;
  b.leader = a.url();
  auto c = Client(a.url() + "," + b.url());
  ASSERT_TRUE(c->Call("GET", "/x").ok());
  EXPECT_EQ(a.gets, 1);
  // a turns standby naming a server outside the list (as a compromised or misconfigured
  // one could): not followed; the next of the list, which leads now, answers.
  a.standby = true;
  a.leader = elsewhere.url();
  b.standby = false;
  b.epoch = 3;
  Result<std::string> r = c->Call("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->find(b.url()), std::string::npos);
  EXPECT_EQ(elsewhere.gets, 0);
  EXPECT_EQ(elsewhere.healths, 0);
  EXPECT_EQ(a.gets, 2);
  EXPECT_EQ(b.gets, 1);
}

TEST(HttpFailover, ADeadAddressIsSkipped) {
  FakeServer leader;
  auto c = Client(DeadUrl() + ", " + leader.url());
  Result<std::string> r = c->Call("POST", "/x", "{}");  // nothing was sent: may go on
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(leader.posts, 1);
}

// The pauses of a client: recorded, and moving its clock instead of sleeping.
struct Pauses {
  FakeClock clock;
  std::vector<int> ms;
  void Into(HttpClient& c, int wait_ms) {
    c.SetFailoverWait(wait_ms, &clock, [this](int pause) {
      ms.push_back(pause);
      clock.Advance(std::chrono::milliseconds(pause));
    });
  }
};

TEST(HttpFailover, WithNoLeaderItGoesRoundAgainAndThenNamesEveryAddress) {
  FakeServer a, b;
  a.standby = true;
  b.standby = true;
  auto c = Client(a.url() + "," + b.url());
  Pauses pauses;
  pauses.Into(*c, 1000);
  Result<std::string> r = c->Call("GET", "/x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  // The last pause ends at the deadline, and one more round is tried then.
  EXPECT_EQ(pauses.ms, (std::vector<int>{100, 200, 400, 300}));
  EXPECT_NE(r.status().message().find(a.url() + ": a standby, no leader yet"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find(b.url()), std::string::npos);
  // Asked who leads at each round (their health checks); the request itself goes out
  // once, at the end, to each.
  EXPECT_EQ(a.healths, 5);
  EXPECT_EQ(a.gets, 1);
}

TEST(HttpFailover, ALeaderFoundWhileWaitingAnswers) {
  FakeServer a, b;
  a.standby = true;
  b.standby = true;
  auto c = Client(a.url() + "," + b.url());
  // The takeover happens during the second pause.
  FakeClock clock;
  c->SetFailoverWait(20000, &clock, [&](int ms) {
    clock.Advance(std::chrono::milliseconds(ms));
    if (ms == 200) {
      b.standby = false;
      b.epoch = 2;
    }
  });
  EXPECT_TRUE(c->Call("GET", "/x").ok());
  EXPECT_EQ(a.gets, 0);  // the third round's health checks found b leading
  EXPECT_EQ(b.gets, 1);
}

TEST(HttpFailover, TheWaitEndsByTheClockAtTheDefault) {
  FakeServer a, b;
  a.standby = true;
  b.standby = true;
  b.leader = "http://10.255.255.1:8686";  // not in the list
  auto c = Client(a.url() + "," + b.url());
  Pauses pauses;
  pauses.Into(*c, 20000);
  ASSERT_FALSE(c->Call("GET", "/x").ok());
  // 100 ms doubling to 1 s, 20 s in all.
  ASSERT_GE(pauses.ms.size(), 5u);
  EXPECT_EQ(std::vector<int>(pauses.ms.begin(), pauses.ms.begin() + 5),
            (std::vector<int>{100, 200, 400, 800, 1000}));
  int total = 0;
  for (int ms : pauses.ms) total += ms;
  EXPECT_EQ(total, 20000);
  EXPECT_EQ(pauses.ms.size(), 23u);  // 4 doubling, 18 of 1 s, 0.5 s to the deadline
  EXPECT_EQ(c->address(), a.url() + "," + b.url());
}

TEST(HttpFailover, NoWaitingAtZero) {
  FakeServer a, b;
  a.standby = true;
  b.standby = true;
  auto c = Client(a.url() + "," + b.url());
  Pauses pauses;
  pauses.Into(*c, 0);
  ASSERT_FALSE(c->Call("GET", "/x").ok());
  EXPECT_TRUE(pauses.ms.empty());
  EXPECT_EQ(a.gets, 1);
  EXPECT_EQ(b.gets, 1);
}

TEST(HttpFailover, AbortEndsTheWaitForALeader) {
  FakeServer a, b;
  a.standby = true;
  b.standby = true;
  auto c = Client(a.url() + "," + b.url());
  c->SetFailoverWait(60000);  // real pauses, ended by Abort
  std::thread aborter([&] {
    EXPECT_TRUE(WaitFor([&] { return b.healths >= 2; }));  // in its second pause or later
    c->Abort();
  });
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> r = c->Call("GET", "/x");
  aborter.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // And every later request fails without being sent.
  EXPECT_FALSE(c->Call("GET", "/x").ok());
  EXPECT_EQ(a.gets + b.gets, 0);
}

TEST(HttpFailover, AGetWhoseReplyIsLostIsAskedOfTheNext) {
  FakeServer stalled, other;
  stalled.stall = true;
  auto c = Client(stalled.url() + "," + other.url(), /*timeout_ms=*/300);
  Result<std::string> r = c->Call("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->find(other.url()), std::string::npos);
}

TEST(HttpFailover, AHeadGoesToTheLeader) {
  FakeServer leader, standby;
  leader.epoch = 2;
  standby.standby = true;
  standby.leader = leader.url();
  auto c = Client(standby.url() + "," + leader.url());
  Result<HttpResponse> r = c->Request("HEAD", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(leader.gets, 1);
  EXPECT_EQ(standby.gets, 0);
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
  EXPECT_NE(refused.status().message().find("a reply from a deposed leader at " +
                                            old_leader.url() +
                                            ": epoch 4, epoch 5 already seen"),
            std::string::npos)
      << refused.status().message();
  // A higher epoch raises the floor.
  old_leader.epoch = 9;
  ASSERT_TRUE(alone->Call("GET", "/x").ok());
  EXPECT_EQ((*floor)->value(), 9);
}

TEST(HttpFailover, OnceAnEpochIsSeenASuccessWithoutOneIsRefused) {
  FakeServer leaderless, leader;
  leader.epoch = 3;
  Result<std::shared_ptr<EpochFloor>> floor = EpochFloor::Open("");
  ASSERT_TRUE(floor.ok());
  auto c = Client(leaderless.url() + "," + leader.url());
  c->SetEpochFloor(*floor);
  // Floor 0: a server without a lease is a server like before.
  auto alone = Client(leaderless.url());
  alone->SetEpochFloor(*floor);
  ASSERT_TRUE(alone->Call("GET", "/x").ok());
  ASSERT_TRUE((*floor)->Admit(3));
  Result<std::string> r = c->Call("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->find(leader.url()), std::string::npos);
  Result<std::string> refused = alone->Call("GET", "/x");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no epoch, epoch 3 already seen"),
            std::string::npos)
      << refused.status().message();
}

TEST(HttpFailover, ASingleAddressAnswersAsBefore) {
  FakeServer standby;
  standby.standby = true;
  standby.leader = "http://10.255.255.1:8686";
  auto c = Client(standby.url());
  Result<HttpResponse> r = c->Request("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 503);  // the standby's answer is the answer
  const std::string dead = DeadUrl();
  auto gone = Client(dead);
  Result<std::string> e = gone->Call("POST", "/x", "{}");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("cannot reach the Hachi server at " + dead),
            std::string::npos)
      << e.status().message();
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

TEST(HttpFailover, AServerThatClosesUnderABodyIsAnErrorNotASigpipe) {
  // A server at its bound answers 503 and closes before reading the body: the client's
  // next write to it fails. With SIGPIPE at its default, that killed the CLI and the
  // agent (exit 141); it must be an error like any other.
  ::signal(SIGPIPE, SIG_DFL);
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(lfd, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::atomic<int> closed{0};
  std::thread refuser([&] {
    for (int i = 0; i < 4; ++i) {
      const int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      char buf[1024];
      (void)!::recv(fd, buf, sizeof buf, 0);
      static const char kRefusal[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
          "Connection: close\r\n\r\n";
      (void)!::send(fd, kRefusal, sizeof kRefusal - 1, MSG_NOSIGNAL);
      linger hard{1, 0};  // a reset: the client's next write fails at once
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
      ::close(fd);
      ++closed;
    }
  });
  auto c = Client("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), 3000);
  for (int i = 0; i < 3; ++i) {
    Result<HttpResponse> r = c->Request("POST", "/x", std::string(8 << 20, 'x'));
    EXPECT_TRUE(!r.ok() || r->status == 503) << r.status().ToString();
  }
  EXPECT_GE(closed.load(), 1);
  ::shutdown(lfd, SHUT_RDWR);
  ::close(lfd);
  refuser.join();
}

TEST(HttpFailover, ABadElementOfTheListIsNamed) {
  Result<std::unique_ptr<HttpClient>> c =
      HttpClient::Create("http://127.0.0.1:1,http://nowhere", 1000);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'http://nowhere'"), std::string::npos)
      << c.status().message();
}

TEST(EpochFloor, TellsItsObserverOnceAndFromWhom) {
  Result<std::shared_ptr<EpochFloor>> f = EpochFloor::Open("");
  ASSERT_TRUE(f.ok());
  std::vector<std::string> told;
  (*f)->SetRiseObserver([&told](int64_t epoch, const std::string& from) {
    told.push_back(from + " " + std::to_string(epoch));
  });
  EXPECT_TRUE((*f)->Admit(5, "http://a:1"));
  EXPECT_TRUE((*f)->Admit(5, "http://a:1"));
  EXPECT_FALSE((*f)->Admit(4, "http://b:1"));
  EXPECT_TRUE((*f)->Admit(6, "http://b:1"));
  EXPECT_EQ(told, (std::vector<std::string>{"http://a:1 5", "http://b:1 6"}));
}

TEST(EpochFloor, RacingRisesLeaveTheHighest) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("hachi-epoch-race-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/epoch";
  {
    Result<std::shared_ptr<EpochFloor>> f = EpochFloor::Open(path);
    ASSERT_TRUE(f.ok());
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&f, t] {
        for (int e = 1; e <= 50; ++e) (*f)->Admit(e * 4 + t);
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ((*f)->value(), 203);
  }
  Result<std::shared_ptr<EpochFloor>> again = EpochFloor::Open(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->value(), 203);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir);
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
