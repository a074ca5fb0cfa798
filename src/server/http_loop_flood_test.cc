// The connection layer against floods (server/http_loop.h): who may make it read a
// body, hold replies, or take the connections others need. Raw sockets, bounded waits.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/testing/wait_for.h"
#include "server/http_loop.h"
#include "server/http_loop_testing.h"

namespace hachi::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace rawhttp;  // NOLINT(build/namespaces): the raw clients

class HttpLoopFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    router_.Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.status = 200;
      res.set_content("hello", "text/plain");
    });
    router_.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.status = 200;
      res.set_content(std::string(256 << 10, 'b'), "text/plain");
    });
    router_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 200;
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    // Who is who, from one header: "X-Who: agent" is privileged, "X-Who: NAME" that
    // user, "X-Who: bad" refused, none anonymous.
    router_.set_admission_handler([this](const httplib::Request& req) {
      ++admissions_;
      Admission a;
      const std::string who = req.get_header_value("X-Who");
      if (who == "bad") {
        a.status = Unauthenticated("not a valid token");
      } else if (who == "agent") {
        a.peer = Admission::Peer::kPrivileged;
      } else if (!who.empty()) {
        a.peer = Admission::Peer::kUser;
        a.user = who;
      } else if (req.method == "POST") {
        a.status = Unauthenticated("anonymous callers may only read");
      }
      return a;
    });
  }
  void Start(HttpLoopOptions o) {
    loop_ = std::make_unique<HttpLoop>(&router_, o);
    Result<int> port = loop_->ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    socket_ = ::testing::TempDir() + "/hlf-" + std::to_string(::getpid()) + ".sock";
    ASSERT_TRUE(loop_->ListenUnix(socket_).ok());
    ASSERT_TRUE(loop_->Start().ok());
  }
  void TearDown() override {
    if (loop_) loop_->Stop();
  }
  // One request on a new connection (or `fd`), its reply.
  std::string Ask(const std::string& request, int fd = -1) {
    const bool own = fd < 0;
    if (own) fd = ConnectTcp(port_);
    SendAll(fd, request);
    std::string r = ReadReplies(fd, 1, 3000);
    if (own) ::close(fd);
    return r;
  }

  HttpRouter router_;
  std::unique_ptr<HttpLoop> loop_;
  int port_ = 0;
  std::string socket_;
  std::atomic<int> admissions_{0};
};

TEST_F(HttpLoopFloodTest, ABodyFromACallerTheGateRefusesIsNeverRead) {
  Start({});
  // 4 MiB announced and not sent: the refusal comes on the head, at once.
  const int fd = ConnectTcp(port_);
  SendAll(fd, "POST /echo HTTP/1.1\r\nContent-Length: 4194304\r\n\r\n");
  const std::string r = ReadReplies(fd, 1, 2000);
  EXPECT_EQ(StatusOf(r), 401) << r;
  EXPECT_NE(r.find("anonymous callers may only read"), std::string::npos) << r;
  EXPECT_NE(r.find("WWW-Authenticate: Bearer"), std::string::npos) << r;
  EXPECT_TRUE(ClosedWithin(fd, 2000));
  ::close(fd);
  EXPECT_EQ(
      StatusOf(Ask("POST /echo HTTP/1.1\r\nX-Who: bad\r\nContent-Length: 9\r\n\r\n")),
      401);
  EXPECT_EQ(loop_->stats().refused_on_head, 2);
  // An admitted caller's body is read, whether it came with the head or after it.
  const std::string ok =
      Ask("POST /echo HTTP/1.1\r\nX-Who: alice\r\nContent-Length: 5\r\n\r\nabcde");
  EXPECT_EQ(StatusOf(ok), 200) << ok;
  EXPECT_NE(ok.find("\r\n\r\n5"), std::string::npos) << ok;
  const int slow = ConnectTcp(port_);
  SendAll(slow,
          "POST /echo HTTP/1.1\r\nX-Who: alice\r\nExpect: 100-continue\r\n"
          "Content-Length: 3\r\n\r\n");
  const std::string cont = ReadReplies(slow, 1, 2000);
  EXPECT_EQ(StatusOf(cont), 100) << cont;
  SendAll(slow, "xyz");
  const std::string body = ReadReplies(slow, 1, 2000);
  EXPECT_NE(body.find("\r\n\r\n3"), std::string::npos) << body;
  ::close(slow);
}

TEST_F(HttpLoopFloodTest, BodiesInFlightAreBoundedPerUserAndInAll) {
  HttpLoopOptions o;
  o.max_body_bytes_per_user = 1 << 20;
  o.max_body_bytes_in_flight = 2 << 20;
  Start(o);
  // Two half-sent 512 KiB bodies of alice's hold her whole bound.
  const std::string head = "POST /echo HTTP/1.1\r\nContent-Length: 524288\r\nX-Who: ";
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(ConnectTcp(port_));
    SendAll(held.back(), head + "alice\r\n\r\n" + std::string(1000, 'a'));
  }
  WaitFor([&] { return admissions_.load() >= 2; }, milliseconds(2000));
  const std::string third = Ask(head + "alice\r\n\r\n");
  EXPECT_EQ(StatusOf(third), 503) << third;
  EXPECT_NE(third.find("this user's requests"), std::string::npos) << third;
  // bob has his own bound, and the two of them fill the total.
  for (int i = 0; i < 2; ++i) {
    held.push_back(ConnectTcp(port_));
    SendAll(held.back(), head + "bob\r\n\r\n");
  }
  WaitFor([&] { return admissions_.load() >= 5; }, milliseconds(2000));
  const std::string carol = Ask(head + "carol\r\n\r\n");
  EXPECT_EQ(StatusOf(carol), 503) << carol;
  EXPECT_NE(carol.find("requests being read or handled hold more than 2 MiB"),
            std::string::npos)
      << carol;
  // An agent's body is not counted.
  const std::string agent = Ask(head + "agent\r\n\r\n" + std::string(524288, 'g'));
  EXPECT_EQ(StatusOf(agent), 200) << agent;
  EXPECT_EQ(loop_->stats().refused_bodies, 2);
  // A body read and answered gives its bytes back.
  SendAll(held[0], std::string(524288 - 1000, 'a'));
  EXPECT_EQ(StatusOf(ReadReplies(held[0], 1, 3000)), 200);
  const std::string again = Ask(head + "alice\r\n\r\n" + std::string(524288, 'a'));
  EXPECT_EQ(StatusOf(again), 200) << again;
  for (int fd : held) ::close(fd);
}

TEST_F(HttpLoopFloodTest, APipelineThatIsNeverReadHoldsOneReplyNotAll) {
  Start({});
  const int fd = ConnectTcp(port_);
  // 400 requests for 256 KiB each (100 MiB of replies), sent and never read.
  std::string pipeline;
  for (int i = 0; i < 400; ++i) pipeline += "GET /big HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(SendAll(fd, pipeline));
  // The server answers what the sockets' buffers take, then stops reading requests.
  int64_t was = -1;
  for (int i = 0; i < 50 && loop_->stats().requests != was; ++i) {
    was = loop_->stats().requests;
    pollfd p{fd, 0, 0};
    ::poll(&p, 1, 100);  // a tenth of a second for the server to go on, if it would
  }
  EXPECT_LT(loop_->stats().requests, 100) << "replies were queued for a client that "
                                             "does not read them";
  // The client reads after all: every reply comes, in order.
  const std::string all = ReadReplies(fd, 400, 20000);
  size_t replies = 0;
  for (size_t at = all.find("HTTP/1.1 200"); at != std::string::npos;
       at = all.find("HTTP/1.1 200", at + 1)) {
    ++replies;
  }
  EXPECT_EQ(replies, 400u) << "requests " << loop_->stats().requests << ", timed out "
                           << loop_->stats().timed_out << ", open "
                           << loop_->stats().connections << ", bytes " << all.size();
  ::close(fd);
}

TEST_F(HttpLoopFloodTest, IdleAnonymousConnectionsMakeRoomForAgentsUsersAndTheSocket) {
  HttpLoopOptions o;
  o.max_connections = 300;
  o.socket_reserve = 40;  // TCP: 260
  o.max_per_address = 100;
  Start(o);
  // Idle keep-alive connections from five loopback addresses, up to each one's bound:
  // more than TCP's room.
  std::vector<int> flood;
  const char* sources[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5",
                           "127.0.0.6"};
  for (const char* source : sources) {
    for (int i = 0; i < 100; ++i) {
      const int fd = ConnectTcp(port_, source);
      if (fd < 0) continue;
      if (i % 2 == 0) SendAll(fd, "GET /hello HTTP/1.1\r\n\r\n");  // then idle
      flood.push_back(fd);
    }
  }
  ASSERT_GT(flood.size(), 260u) << "loopback source addresses are not available";
  WaitFor([&] { return loop_->stats().evicted_idle > 0; }, milliseconds(3000));
  EXPECT_GT(loop_->stats().evicted_idle, 0);
  EXPECT_LE(loop_->stats().connections, 260);
  // The socket's room is kept.
  const int local = ConnectUnix(socket_);
  const std::string s = Ask("GET /hello HTTP/1.1\r\n\r\n", local);
  EXPECT_EQ(StatusOf(s), 200) << s;
  // An agent connecting now gets in (an anonymous idle one makes room), and then
  // counts as an agent: the next flood does not close it.
  const int agent = ConnectTcp(port_);
  const std::string a =
      Ask("POST /echo HTTP/1.1\r\nX-Who: agent\r\nContent-Length: 2\r\n\r\nhi", agent);
  EXPECT_EQ(StatusOf(a), 200) << a;
  for (const char* source : sources) {
    for (int i = 0; i < 40; ++i) {
      const int fd = ConnectTcp(port_, source);
      if (fd >= 0) flood.push_back(fd);
    }
  }
  const std::string again = Ask("GET /hello HTTP/1.1\r\nX-Who: agent\r\n\r\n", agent);
  EXPECT_EQ(StatusOf(again), 200) << again;
  ::close(agent);
  ::close(local);
  for (int fd : flood) ::close(fd);
}

TEST_F(HttpLoopFloodTest, OneUsersConnectionsAreBoundedWhateverTheirAddresses) {
  HttpLoopOptions o;
  o.max_per_user = 2;
  Start(o);
  const char* sources[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
  std::vector<int> fds;
  for (const char* source : sources) {
    const int fd = ConnectTcp(port_, source);
    ASSERT_GE(fd, 0);
    const std::string r = Ask("GET /hello HTTP/1.1\r\nX-Who: alice\r\n\r\n", fd);
    EXPECT_EQ(StatusOf(r), 200) << r;
    fds.push_back(fd);
  }
  // alice's third connection was answered, then closed; her first two stay.
  EXPECT_TRUE(ClosedWithin(fds[2], 2000));
  EXPECT_EQ(loop_->stats().over_user_bound, 1);
  EXPECT_EQ(StatusOf(Ask("GET /hello HTTP/1.1\r\nX-Who: alice\r\n\r\n", fds[0])), 200);
  // Another user is not touched by alice's bound.
  EXPECT_EQ(StatusOf(Ask("GET /hello HTTP/1.1\r\nX-Who: bob\r\n\r\n")), 200);
  for (int fd : fds) ::close(fd);
}

}  // namespace
}  // namespace hachi::server
