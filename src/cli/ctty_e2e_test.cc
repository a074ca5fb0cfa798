// A job's output path cannot give the server a controlling terminal.
// `hachi dev` runs as a session leader without one (as under setsid or a service
// manager); a job is submitted with `-o /dev/pts/N`, a pty of the submitter's, owned by
// the job's uid (the test's own); once the job has run, GET /jobs/ID/log asks the server
// to read that "log". Before the fix the server opened the pty (O_RDONLY without
// O_NOCTTY, the type checked only afterwards), which made it the server's controlling
// terminal: a ^C there stopped the server, closing it killed it by SIGHUP. Now the
// server opens nothing that is not a regular file: the answer is a 404, field 7 (tty_nr)
// of /proc/PID/stat stays 0, and the server is still alive after the pty is closed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "core/testing/paths.h"

namespace hachi::cli {
namespace {

using std::chrono::milliseconds;
using testing::Hachi;
using testing::ReadFile;

// Field 7 of /proc/PID/stat (after the parenthesised command name): the controlling
// terminal's device number, 0 for none; -1 when the process is gone.
long TtyNr(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  std::string state;
  long ppid = 0, pgrp = 0, session = 0, tty = -1;
  rest >> state >> ppid >> pgrp >> session >> tty;
  return tty;
}

// GET `path` over the server's Unix socket (the kernel says who asks: the job's owner),
// the whole answer, head included.
std::string Get(const std::string& socket_path, const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", socket_path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(req.size()))
    return "";
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, n);
  ::close(fd);
  return out;
}

TEST(CttyE2e, AJobsPtyNeverBecomesTheServersControllingTerminal) {
  char tmpl[] = "/tmp/hachi-ctty-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string log = dir + "/dev.log";

  // The submitter's pty: the master stays here, the slave is the job's "output".
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0) << "no pty: " << std::strerror(errno);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const std::string pts = ::ptsname(master);
  // The job's uid is the submitter's (the test's): the pty must be its, as it is.
  struct stat st {};
  ASSERT_EQ(::stat(pts.c_str(), &st), 0);
  ASSERT_EQ(st.st_uid, ::geteuid()) << pts;

  const pid_t dev = ::fork();
  if (dev == 0) {
    ::setsid();  // a session leader with no controlling terminal, as a service is
    const std::string cmd = "exec " + BinaryDir() + "/hachi dev --state-dir " + dir +
                            "/state --listen 127.0.0.1:0 </dev/null >/dev/null 2>" + log;
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    ::_exit(127);
  }
  ASSERT_GT(dev, 0);
  bool reaped = false;
  auto stop = [&] {
    if (reaped) return;  // its pid may be another process's by now
    reaped = true;
    ::kill(dev, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(dev, nullptr, WNOHANG) == dev) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
    ::kill(dev, SIGKILL);
    ::waitpid(dev, nullptr, 0);
  };
  const std::string sock = dir + "/state/hachi.sock";
  ::setenv("HACHI_SERVER", ("unix:" + sock).c_str(), 1);
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    up = Hachi("nodes -o %n").out.find("node") != std::string::npos;
  }
  if (!up) {
    stop();
    FAIL() << "hachi dev did not start:\n" << ReadFile(log);
  }
  EXPECT_EQ(TtyNr(dev), 0) << "started with a terminal already";

  const testing::CmdResult sub =
      Hachi("submit --parsable -G 1 -o " + pts + " --wrap 'echo to the pty'");
  const long long id = std::atoll(sub.out.c_str());
  EXPECT_GT(id, 0) << sub.out;
  bool ran = false;
  for (int i = 0; i < 200 && !ran && id > 0; ++i) {
    ran = Hachi("show job " + std::to_string(id)).out.find("COMPLETED") !=
          std::string::npos;
    if (!ran) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(ran) << Hachi("show job " + std::to_string(id)).out;

  const std::string answer = Get(sock, "/api/v1/jobs/" + std::to_string(id) + "/log");
  EXPECT_NE(answer.find("HTTP/1.1 404"), std::string::npos) << answer;
  EXPECT_NE(answer.find("has no log readable here"), std::string::npos) << answer;
  EXPECT_EQ(TtyNr(dev), 0) << "the server took " << pts << " as its terminal";

  // Closing the pty hangs up its session's leader, if it is one's terminal.
  ::close(master);
  std::this_thread::sleep_for(milliseconds(300));
  const pid_t gone = ::waitpid(dev, nullptr, WNOHANG);
  reaped = gone == dev;
  EXPECT_EQ(gone, 0) << "hachi dev died:\n" << ReadFile(log);
  EXPECT_NE(Hachi("nodes -o %n").out.find("node"), std::string::npos);
  stop();
  ::unsetenv("HACHI_SERVER");
  if (!HasFailure()) std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace hachi::cli
