// Who is who with real processes: `hachi dev` as root, the CLI as root and as
// `nobody` (setpriv), over the Unix socket and over TCP with a token, and over HTTPS with
// a certificate made here. User A (nobody) cannot cancel user B's (root's) job through
// the socket nor with A's token; a job's output is opened as its user, so nobody's job
// cannot write into a directory only root may write to. Root only (it switches users).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "cli/cli_testing.h"
#include "core/testing/paths.h"

namespace hachi::cli {
namespace {

using nlohmann::json;
using testing::CmdResult;
using testing::Hachi;

using testing::ReadFile;
using testing::Shell;

// `hachi ARGS` as `nobody` (uid/gid 65534, no groups), with `env` before it.
CmdResult AsNobody(const std::string& env, const std::string& args) {
  return Shell(env + " setpriv --reuid=65534 --regid=65534 --clear-groups " +
               BinaryDir() + "/hachi " + args + " 2>&1");
}

class AuthE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || std::system("command -v setpriv >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "needs root and setpriv (switches to nobody)";
    }
    char tmpl[] = "/tmp/hachi-auth-e2e-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0755);  // nobody reaches the socket inside
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    ::unsetenv("HACHI_SERVER");
    if (!dir_.empty() && !HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  // Starts `hachi dev` with `extra` flags; sets url_ (TCP) and HACHI_SERVER (the socket).
  void StartDev(const std::string& extra = "") {
    const std::string log = dir_ + "/dev.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string cmd = "exec " + BinaryDir() + "/hachi dev --state-dir " + dir_ +
                              "/state --listen 127.0.0.1:0 " + extra + " 2>" + log;
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 200 && url_.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::string text = ReadFile(log);
      const size_t at = text.find("listening on http");
      if (at != std::string::npos) {
        url_ = text.substr(at + 13, text.find(' ', at + 13) - (at + 13));
      }
    }
    ASSERT_FALSE(url_.empty()) << ReadFile(log);
    ::chmod((dir_ + "/state").c_str(), 0755);
    socket_ = "unix:" + dir_ + "/state/hachi.sock";
    ::setenv("HACHI_SERVER", socket_.c_str(), 1);
    for (int i = 0; i < 100; ++i) {
      if (Hachi("nodes -o %n").out.find("node") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::string StateOf(int64_t id) {
    const CmdResult r = Hachi("queue -a --json", false);
    const json j = json::parse(r.out, nullptr, false);
    if (j.is_discarded()) return "";
    for (const json& job : j["jobs"]) {
      if (job["id"].get<int64_t>() == id) return job["state"].get<std::string>();
    }
    return "";
  }
  bool WaitEnded(int64_t id) {
    for (int i = 0; i < 100; ++i) {
      const std::string s = StateOf(id);
      if (!s.empty() && s != "PENDING" && s != "RUNNING") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::string dir_, url_, socket_;
  pid_t pid_ = -1;
};

TEST_F(AuthE2e, NobodyCannotCancelRootsJobNorWriteWhereOnlyRootMay) {
  StartDev();
  // Root's job, held so that it stays.
  const CmdResult mine = Hachi("submit --parsable --hold -G 1 --wrap 'true'", false);
  ASSERT_EQ(mine.exit_code, 0) << mine.out;
  const int64_t id = std::atoll(mine.out.c_str());

  // Through the socket, nobody is nobody: refused, whatever the request says.
  const std::string on_socket = "HACHI_SERVER=" + socket_;
  CmdResult r = AsNobody(on_socket, "cancel " + std::to_string(id));
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("belongs to root"), std::string::npos) << r.out;
  r = AsNobody(on_socket, "token create nobody --admin");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("only an admin"), std::string::npos) << r.out;
  r = AsNobody(on_socket, "drain node1");
  EXPECT_NE(r.out.find("only an admin"), std::string::npos) << r.out;

  // Root issues nobody a token; over TCP it is nobody's, and still not enough.
  const CmdResult token = Hachi("token create nobody", false);
  ASSERT_EQ(token.exit_code, 0) << token.out;
  const std::string t = token.out.substr(0, token.out.find('\n'));
  ASSERT_EQ(t.rfind("hachi_", 0), 0u) << t;
  const std::string on_tcp = "HACHI_SERVER=" + url_ + " HACHI_TOKEN=" + t;
  r = AsNobody(on_tcp, "cancel " + std::to_string(id));
  EXPECT_NE(r.out.find("belongs to root"), std::string::npos) << r.out;
  r = AsNobody("HACHI_SERVER=" + url_, "cancel " + std::to_string(id));
  EXPECT_NE(r.out.find("needs a token"), std::string::npos) << r.out;
  EXPECT_EQ(StateOf(id), "PENDING");

  // nobody's jobs run as nobody: output into a directory anyone may write lands there,
  // owned by nobody; into root's own directory it cannot be opened and the job fails.
  const std::string open_dir = dir_ + "/open", closed_dir = dir_ + "/closed";
  ::mkdir(open_dir.c_str(), 0777);
  ::chmod(open_dir.c_str(), 0777);
  ::mkdir(closed_dir.c_str(), 0755);
  r = AsNobody(on_tcp, "submit --parsable -G 1 -D " + open_dir + " -o " + open_dir +
                           "/%j.out --wrap 'id -u'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const int64_t ok = std::atoll(r.out.c_str());
  r = AsNobody(on_tcp, "submit --parsable -G 1 -D " + open_dir + " -o " + closed_dir +
                           "/stolen.out --wrap 'id -u'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const int64_t denied = std::atoll(r.out.c_str());
  ASSERT_TRUE(WaitEnded(ok) && WaitEnded(denied));
  EXPECT_EQ(StateOf(ok), "COMPLETED");
  EXPECT_EQ(ReadFile(open_dir + "/" + std::to_string(ok) + ".out"), "65534\n");
  struct stat st {};
  ASSERT_EQ(::stat((open_dir + "/" + std::to_string(ok) + ".out").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(StateOf(denied), "FAILED");
  EXPECT_NE(::access((closed_dir + "/stolen.out").c_str(), F_OK), 0)
      << "nothing written there";
  // A path walking out of the working directory is refused at submit.
  r = AsNobody(on_tcp, "submit -G 1 -D " + open_dir + " -o ../closed/x.out --wrap true");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("'..'"), std::string::npos) << r.out;

  // Root (on the socket) revokes the token: it stops working at once.
  const CmdResult list = Hachi("token list --json", false);
  const json tokens = json::parse(list.out, nullptr, false);
  ASSERT_FALSE(tokens.is_discarded()) << list.out;
  ASSERT_EQ(tokens["tokens"].size(), 1u);
  ASSERT_EQ(
      Hachi("token revoke " + tokens["tokens"][0]["id"].get<std::string>()).exit_code, 0);
  r = AsNobody(on_tcp, "submit -G 1 --wrap true");
  EXPECT_NE(r.out.find("not valid"), std::string::npos) << r.out;
}

// Without $HACHI_TOKEN the CLI reads ~/.config/hachi/token, and only when no one else
// can.
TEST_F(AuthE2e, TokenFileMustBeTheUsersAlone) {
  StartDev();
  const CmdResult token = Hachi("token create root", false);
  ASSERT_EQ(token.exit_code, 0) << token.out;
  const std::string home = dir_ + "/home";
  ASSERT_EQ(std::system(("mkdir -p " + home + "/.config/hachi").c_str()), 0);
  const std::string file = home + "/.config/hachi/token";
  {
    std::ofstream f(file);
    f << token.out;
  }
  ::chmod(file.c_str(), 0644);
  const std::string env =
      "env -u HACHI_TOKEN HOME=" + home + " HACHI_SERVER=" + url_ + " ";
  auto submit = [&] {
    return Shell(env + BinaryDir() + "/hachi submit -G 1 --hold --wrap true 2>&1");
  };
  CmdResult r = submit();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("is mode 0644"), std::string::npos) << r.out;
  ::chmod(file.c_str(), 0600);
  r = submit();
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Submitted batch job"), std::string::npos) << r.out;
}

TEST_F(AuthE2e, HttpsWithTheServersOwnCertificate) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no openssl";
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  ASSERT_EQ(std::system(
                ("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                 "-nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
                 "-keyout " +
                 key + " -out " + cert + " >/dev/null 2>&1")
                    .c_str()),
            0);
  StartDev("--tls-cert " + cert + " --tls-key " + key);
  ASSERT_EQ(url_.rfind("https://", 0), 0u) << url_;
  const CmdResult token = Hachi("token create root", false);
  ASSERT_EQ(token.exit_code, 0) << token.out;
  const std::string t = token.out.substr(0, token.out.find('\n'));
  const std::string env = "HACHI_SERVER=" + url_ + " HACHI_TOKEN=" + t + " ";
  CmdResult r =
      Hachi("--cacert " + cert + " nodes -o %n", false);  // on the socket: plain
  EXPECT_EQ(r.exit_code, 0);
  const std::string hachi = BinaryDir() + "/hachi";
  FILE* p =
      popen((env + hachi + " --cacert " + cert + " queue 2>&1; echo rc=$?").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096] = {};
  std::string out;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  EXPECT_NE(out.find("JOBID"), std::string::npos) << out;
  EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
  // Without the CA the certificate is refused.
  p = popen((env + hachi + " queue 2>&1; echo rc=$?").c_str(), "r");
  ASSERT_NE(p, nullptr);
  out.clear();
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  EXPECT_EQ(out.find("rc=0"), std::string::npos) << out;
}

}  // namespace
}  // namespace hachi::cli
