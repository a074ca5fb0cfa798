// The connection layer on its own (server/http_loop.h), over raw sockets: what a slow,
// idle, greedy or hostile client can and cannot do to it, and the parked long polls.
#include "server/http_loop.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/wait_for.h"
#include "server/http_loop_testing.h"

namespace hachi::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace rawhttp;  // NOLINT(build/namespaces): the raw clients

class HttpLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Descriptors for the tests that open a thousand connections.
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    router_.Get("/hello", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 200;
      res.set_content("hello " + req.get_header_value(kPeerCredHeader), "text/plain");
    });
    router_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 200;
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    // Waits on "t/NAME" until `ready_` says so, or wait_ms.
    router_.GetPoll("/wait/(\\w+)", [this](const httplib::Request& req,
                                           httplib::Response& res, LongPoll& poll) {
      runs_.fetch_add(1);
      const std::string topic = "t/" + std::string(req.matches[1]);
      if (req.has_param("notify_self")) loop_->Notify(topic);  // before it parks
      if (!ready_.load() && !poll.expired()) {
        const int ms = std::atoi(req.get_param_value("wait_ms").c_str());
        return poll.WaitFor(topic, poll.started() + milliseconds(ms));
      }
      res.status = 200;
      res.set_content(poll.expired() ? "expired" : "ready", "text/plain");
    });
  }
  void Start(HttpLoopOptions o) {
    loop_ = std::make_unique<HttpLoop>(&router_, o);
    Result<int> port = loop_->ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    socket_ = ::testing::TempDir() + "/hl-" + std::to_string(::getpid()) + ".sock";
    ASSERT_TRUE(loop_->ListenUnix(socket_).ok());
    ASSERT_TRUE(loop_->Start().ok());
  }
  void TearDown() override {
    if (loop_) loop_->Stop();
  }
  std::string Get(const std::string& path, int fd = -1) {
    const bool own = fd < 0;
    if (own) fd = ConnectTcp(port_);
    SendAll(fd, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    std::string r = ReadReplies(fd, 1);
    if (own) ::close(fd);
    return r;
  }

  HttpRouter router_;
  std::unique_ptr<HttpLoop> loop_;
  int port_ = 0;
  std::string socket_;
  std::atomic<bool> ready_{false};
  std::atomic<int> runs_{0};
};

TEST_F(HttpLoopTest, KeepAliveAndPipelinedRequestsAreAnsweredInOrder) {
  Start({});
  const int fd = ConnectTcp(port_);
  ASSERT_TRUE(SendAll(fd,
                      "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
                      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde"
                      "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\n"));
  const std::string r = ReadReplies(fd, 3);
  const size_t a = r.find("hello");
  const size_t b = r.find("\r\n\r\n5", a);
  const size_t c = r.find("\r\n\r\n5", b + 1);
  EXPECT_NE(a, std::string::npos) << r;
  EXPECT_NE(b, std::string::npos) << r;
  EXPECT_NE(c, std::string::npos) << r;
  ::close(fd);
}

TEST_F(HttpLoopTest, AnUnknownPathIs404AndABadRequestLine400) {
  Start({});
  EXPECT_EQ(StatusOf(Get("/nope")), 404);
  const int fd = ConnectTcp(port_);
  SendAll(fd, "GARBAGE\r\n\r\n");
  const std::string r = ReadReplies(fd, 1);
  EXPECT_EQ(StatusOf(r), 400) << r;
  EXPECT_NE(r.find("bad request line"), std::string::npos) << r;
  EXPECT_TRUE(ClosedWithin(fd, 2000));
  ::close(fd);
  EXPECT_EQ(StatusOf(Get("/hello")), 200);  // and it goes on serving
}

TEST_F(HttpLoopTest, ALargeContentLengthIsRefusedBeforeItsBodyIsRead) {
  HttpLoopOptions o;
  o.max_body_bytes = 4 << 20;
  Start(o);
  const int fd = ConnectTcp(port_);
  // 300 MiB announced, not a byte of it sent: the answer must not wait for it.
  SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 314572800\r\n\r\n");
  const std::string r = ReadReplies(fd, 1, 3000);
  EXPECT_EQ(StatusOf(r), 413) << r;
  EXPECT_NE(r.find("at most 4194304"), std::string::npos) << r;
  EXPECT_TRUE(ClosedWithin(fd, 2000));
  ::close(fd);
  EXPECT_EQ(loop_->stats().too_large, 1);
}

TEST_F(HttpLoopTest, AChunkedBodyIsRefusedOnceItPassesTheLimit) {
  HttpLoopOptions o;
  o.max_body_bytes = 4 << 20;
  Start(o);
  const int fd = ConnectTcp(port_);
  SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  // Up to 300 MiB in 64 KiB chunks; the server must stop it near 4 MiB.
  const std::string chunk = "10000\r\n" + std::string(65536, 'x') + "\r\n";
  size_t sent = 0;
  size_t off = 0;  // within the chunk being sent
  bool refused = false;
  for (int i = 0; i < 200000 && !refused && sent < (size_t{300} << 20); ++i) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      refused = true;
      break;
    }
    const ssize_t n =
        ::send(fd, chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) {
      ::poll(&p, 1, 20);
      continue;
    }
    if (n <= 0) {
      refused = true;
      break;
    }
    sent += static_cast<size_t>(n);
    off = (off + static_cast<size_t>(n)) % chunk.size();
  }
  EXPECT_TRUE(refused);
  const std::string r = ReadReplies(fd, 1, 3000);
  ::close(fd);
  EXPECT_EQ(StatusOf(r), 413) << r;
  // What was sent before the refusal reached us: the limit plus what the sockets'
  // buffers hold — far below the 300 MiB a reader of the whole body would take.
  EXPECT_LT(sent, size_t{40} << 20);
}

TEST_F(HttpLoopTest, ASlowHeadIsCutAtItsDeadlineEvenWhileBytesKeepComing) {
  HttpLoopOptions o;
  o.header_timeout_ms = 600;
  Start(o);
  const int fd = ConnectTcp(port_);
  const auto t0 = steady_clock::now();
  const std::string head = "GET /hello HTTP/1.1\r\nX-Slow: " + std::string(200, 'a');
  bool closed = false;
  // One byte every 50 ms: an inactivity timeout would never fire.
  for (size_t i = 0; i < head.size() && !closed; ++i) {
    if (::send(fd, &head[i], 1, MSG_NOSIGNAL) <= 0) closed = true;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) closed = true;
  }
  const std::string r = ReadReplies(fd, 1, 2000);
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0);
  EXPECT_EQ(StatusOf(r), 408) << r;
  EXPECT_LT(took.count(), 3000);  // the deadline (0.6 s) plus the loop's tick, not 10 s
  EXPECT_GE(took.count(), 500);
  ::close(fd);
  EXPECT_EQ(loop_->stats().timed_out, 1);
}

TEST_F(HttpLoopTest, ConnectionsFromOneAddressAreBounded) {
  HttpLoopOptions o;
  o.max_per_address = 3;
  Start(o);
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) fds.push_back(ConnectTcp(port_));
  EXPECT_EQ(StatusOf(Get("/hello", fds[0])), 200);
  const int extra = ConnectTcp(port_);
  const std::string r = ReadReplies(extra, 1, 2000);
  EXPECT_EQ(StatusOf(r), 503) << r;
  EXPECT_NE(r.find("too many connections from this address"), std::string::npos) << r;
  ::close(extra);
  ::close(fds[2]);
  fds.pop_back();
  // The bound counts open connections: one closed, one more is let in.
  WaitFor([&] { return loop_->stats().connections <= 2; }, milliseconds(1000));
  EXPECT_EQ(StatusOf(Get("/hello")), 200);
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(loop_->stats().refused_per_peer, 1);
}

TEST_F(HttpLoopTest, TheUnixSocketCarriesTheKernelsPeerCredentialsOnly) {
  Start({});
  const int fd = ConnectUnix(socket_);
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /hello HTTP/1.1\r\nX-Hachi-Peer-Cred: 0 0 1\r\n\r\n");
  const std::string r = ReadReplies(fd, 1);
  ::close(fd);
  const std::string want = "hello " + std::to_string(::getuid()) + " " +
                           std::to_string(::getgid()) + " " + std::to_string(::getpid());
  EXPECT_NE(r.find(want), std::string::npos) << r;
  // Over TCP a client's header is dropped, not passed on.
  const int tcp = ConnectTcp(port_);
  SendAll(tcp, "GET /hello HTTP/1.1\r\nX-Hachi-Peer-Cred: 0 0 1\r\n\r\n");
  const std::string t = ReadReplies(tcp, 1);
  ::close(tcp);
  EXPECT_NE(t.find("\r\n\r\nhello "), std::string::npos) << t;
  EXPECT_EQ(t.find("0 0 1"), std::string::npos) << t;
}

TEST_F(HttpLoopTest, AParkedPollWakesOnItsTopicAndExpiresAtItsDeadline) {
  Start({});
  // Woken: answered at the Notify, long before its 10 s.
  const int fd = ConnectTcp(port_);
  SendAll(fd, "GET /wait/a?wait_ms=10000 HTTP/1.1\r\n\r\n");
  WaitFor([&] { return loop_->stats().parked != 0; }, milliseconds(1000));
  ASSERT_EQ(loop_->stats().parked, 1);
  loop_->Notify("t/other");  // someone else's topic: still parked
  EXPECT_FALSE(WaitFor([&] { return loop_->stats().parked != 1; }, milliseconds(100)));
  ready_ = true;
  const auto t0 = steady_clock::now();
  loop_->Notify("t/a");
  const std::string r = ReadReplies(fd, 1, 3000);
  EXPECT_NE(r.find("ready"), std::string::npos) << r;
  EXPECT_LT(steady_clock::now() - t0, milliseconds(1000));
  ::close(fd);
  // Not woken: answered "expired" at its deadline.
  ready_ = false;
  const auto t1 = steady_clock::now();
  const std::string e = Get("/wait/b?wait_ms=300");
  EXPECT_NE(e.find("expired"), std::string::npos) << e;
  EXPECT_GE(steady_clock::now() - t1, milliseconds(290));
}

TEST_F(HttpLoopTest, ANotifyWhileTheHandlerRunsIsNotLost) {
  Start({});
  // The handler notifies its own topic before it parks (as a launch queued between the
  // poll's look and its wait): the request runs again at once instead of sleeping.
  ready_ = false;
  const int fd = ConnectTcp(port_);
  SendAll(fd, "GET /wait/c?wait_ms=5000&notify_self=1 HTTP/1.1\r\n\r\n");
  WaitFor([&] { return runs_.load() >= 3; }, milliseconds(1000));
  EXPECT_GE(runs_.load(), 3);  // ran again after each of its own notifications
  ready_ = true;
  loop_->Notify("t/c");
  EXPECT_NE(ReadReplies(fd, 1, 3000).find("ready"), std::string::npos);
  ::close(fd);
}

TEST_F(HttpLoopTest, AThousandIdleAndParkedConnectionsHoldNoThread) {
  HttpLoopOptions o;
  o.workers = 2;  // far fewer threads than connections
  Start(o);
  std::vector<int> idle, parked;
  for (int i = 0; i < 800; ++i) idle.push_back(ConnectTcp(port_));
  for (int i = 0; i < 300; ++i) {
    const int fd = ConnectUnix(socket_);
    SendAll(fd, "GET /wait/n" + std::to_string(i) + "?wait_ms=30000 HTTP/1.1\r\n\r\n");
    parked.push_back(fd);
  }
  WaitFor([&] { return loop_->stats().parked >= 300; }, milliseconds(3000));
  EXPECT_EQ(loop_->stats().parked, 300);
  EXPECT_GE(loop_->stats().connections, 1100);
  // Meanwhile a new client is answered at once.
  const auto t0 = steady_clock::now();
  EXPECT_EQ(StatusOf(Get("/hello")), 200);
  EXPECT_LT(steady_clock::now() - t0, milliseconds(1000));
  // A client that hangs up while parked frees its connection and its place.
  for (int i = 0; i < 100; ++i) ::close(parked[i]);
  WaitFor([&] { return loop_->stats().parked <= 200; }, milliseconds(2000));
  EXPECT_EQ(loop_->stats().parked, 200);
  for (size_t i = 100; i < parked.size(); ++i) ::close(parked[i]);
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace hachi::server
