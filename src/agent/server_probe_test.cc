#include "agent/server_probe.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

namespace hachi::agent {
namespace {

// A TCP socket bound on 127.0.0.1 (an ephemeral port), listening or not; its port.
int BoundPort(int* fd, bool listening) {
  *fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  if (listening) {
    EXPECT_EQ(::listen(*fd, 4), 0);
  }
  socklen_t len = sizeof a;
  ::getsockname(*fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

TEST(ServerProbe, AListeningServerIsAcceptedAndAPortWithNoneRefuses) {
  int listening = -1;
  const int up = BoundPort(&listening, true);
  EXPECT_EQ(ProbeServer("http://127.0.0.1:" + std::to_string(up), 1000),
            ProbeResult::kAccepted);
  EXPECT_EQ(ProbeServer("127.0.0.1:" + std::to_string(up) + "/", 1000),
            ProbeResult::kAccepted);
  // Bound and not listening: the kernel answers a connect with a reset.
  int bound = -1;
  const int down = BoundPort(&bound, false);
  EXPECT_EQ(ProbeServer("http://127.0.0.1:" + std::to_string(down), 1000),
            ProbeResult::kRefused);
  ::close(listening);
  ::close(bound);
}

TEST(ServerProbe, AUnixSocketWithNoListenerOrNoFileRefuses) {
  char tmpl[] = "/tmp/hachi-probe-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/hachi.sock";
  EXPECT_EQ(ProbeServer("unix:" + path, 1000), ProbeResult::kRefused) << "no file";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&un), sizeof un), 0);
  EXPECT_EQ(ProbeServer("unix:" + path, 1000), ProbeResult::kRefused) << "no listener";
  ASSERT_EQ(::listen(fd, 4), 0);
  EXPECT_EQ(ProbeServer("unix:" + path, 1000), ProbeResult::kAccepted);
  ::close(fd);
  std::filesystem::remove_all(tmpl);
}

TEST(ServerProbe, AnAddressItCannotUseProvesNothing) {
  EXPECT_EQ(ProbeServer("unix:", 100), ProbeResult::kNoAnswer);
  EXPECT_EQ(ProbeServer("no-port", 100), ProbeResult::kNoAnswer);
  EXPECT_EQ(ProbeServer("http://no-such-host.invalid:80", 100), ProbeResult::kNoAnswer);
}

// Several controllers: refused only when every one refuses (any that runs could lead).
TEST(ServerProbe, AListIsRefusedOnlyWhenEveryAddressRefuses) {
  int listening = -1, bound = -1, bound2 = -1;
  const std::string up =
      "http://127.0.0.1:" + std::to_string(BoundPort(&listening, true));
  const std::string down = "http://127.0.0.1:" + std::to_string(BoundPort(&bound, false));
  const std::string down2 =
      "http://127.0.0.1:" + std::to_string(BoundPort(&bound2, false));
  EXPECT_EQ(ProbeServer(down + "," + up, 1000), ProbeResult::kAccepted);
  EXPECT_EQ(ProbeServer(up + ", " + down, 1000), ProbeResult::kAccepted);
  EXPECT_EQ(ProbeServer(down + ", " + down2, 1000), ProbeResult::kRefused);
  EXPECT_EQ(ProbeServer(down + ",no-port", 1000), ProbeResult::kNoAnswer);
  ::close(listening);
  ::close(bound);
  ::close(bound2);
}

}  // namespace
}  // namespace hachi::agent
