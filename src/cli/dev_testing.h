// DevCluster: a `hachi dev` child process for the CLI's end-to-end tests (dev_e2e_test,
// burn_in_e2e_test), its state in a test's temp directory, the CLI pointed at its socket.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"

namespace hachi::cli {

using testing::Hachi;
using testing::ReadFile;

// A `hachi dev` child process on a free port, with its state in a temp directory.
class DevCluster {
 public:
  explicit DevCluster(std::string dir, std::string extra = "") : dir_(std::move(dir)) {
    Start(std::move(extra));
  }
  ~DevCluster() { Stop(); }

  void Start(std::string extra) {
    extra_ = std::move(extra);
    const std::string log = dir_ + "/dev.log";
    ::unlink(log.c_str());
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string cmd = BinaryDir() + "/hachi dev --state-dir " + dir_ +
                              "/state --listen 127.0.0.1:0 " + extra_ + " 2>" + log;
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
      ::_exit(127);
    }
    WaitFor(
        [&] {
          const std::string text = ReadFile(log);
          const size_t at = text.find("listening on http://");
          if (at == std::string::npos) return false;
          url_ = text.substr(at + 13, text.find(' ', at + 13) - (at + 13));
          return true;
        },
        std::chrono::seconds(5), std::chrono::milliseconds(50));
    // The CLI talks to it as a local user does: over the Unix socket, where the kernel
    // says who is asking (TCP needs a token).
    if (!url_.empty()) {
      ::setenv("HACHI_SERVER", ("unix:" + dir_ + "/state/hachi.sock").c_str(), 1);
    }
    // The agents register within a poll of the server starting.
    WaitFor([&] { return Hachi("nodes -o %n").out.find("node") != std::string::npos; },
            std::chrono::milliseconds(2500), std::chrono::milliseconds(50));
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void Kill9() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    url_.clear();
  }
  const std::string& url() const { return url_; }

 private:
  std::string dir_;
  std::string extra_;
  pid_t pid_ = -1;
  std::string url_;
};

}  // namespace hachi::cli
