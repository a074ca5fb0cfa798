#include "agent/burn_in.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/strings.h"

extern char** environ;

namespace hachi::agent {
namespace {

using json = nlohmann::json;

// A check's output kept for its verdict: doctor's JSON is tens of KiB; past this the
// head is dropped (the verdict then falls back to the last line).
constexpr size_t kMaxOutput = size_t{4} << 20;
// How far before a GPU's run began its doctor still counts Xid lines: the resume that
// started it reached this agent within a poll.
constexpr int64_t kXidMarginS = 10;

std::string FirstWord(const std::string& check) {
  const std::string_view t = Trim(check);
  return std::string(t.substr(0, t.find_first_of(" \t")));
}

// The last non-blank line, clipped for a node's reason.
std::string LastLine(const std::string& text) {
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t nl = rest.find_last_of('\n', rest.size() - 1);
    std::string_view line = nl == std::string_view::npos ? rest : rest.substr(nl + 1);
    line = Trim(line);
    if (!line.empty()) return std::string(line.substr(0, 400));
    if (nl == std::string_view::npos) break;
    rest = rest.substr(0, nl);
  }
  return "";
}

// doctor's and commtest's first FAIL item: "persistence (GPU 3): evidence".
std::string FirstFailItem(const std::string& stdout_text) {
  const json j = json::parse(stdout_text, nullptr, false);
  if (!j.is_object() || !j.contains("checks") || !j["checks"].is_array()) return "";
  for (const json& c : j["checks"]) {
    if (!c.is_object() || c.value("status", "") != "FAIL") continue;
    std::string out = c.value("check", "?");
    const std::string evidence = c.value("evidence", "");
    // doctor's evidence names its GPU ("GPU 3: ..."); commtest's does not.
    const bool named = evidence.rfind("GPU", 0) == 0;
    if (!named && c.contains("gpu") && c["gpu"].is_number_integer()) {
      out += " (GPU " + std::to_string(c["gpu"].get<int>()) + ")";
    } else if (!named && c.contains("gpus") && c["gpus"].is_array()) {
      std::string gpus;
      for (const json& g : c["gpus"]) {
        if (!g.is_number_integer()) continue;
        gpus += (gpus.empty() ? "" : "-") + std::to_string(g.get<int>());
      }
      if (!gpus.empty()) out += " (GPUs " + gpus + ")";
    }
    if (!evidence.empty()) out += ": " + evidence.substr(0, 400);
    return out;
  }
  return "";
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void Append(std::string* out, const char* data, size_t n) {
  out->append(data, n);
  if (out->size() > kMaxOutput) out->erase(0, out->size() - kMaxOutput);
}

}  // namespace

std::vector<std::string> BurnInCommand(const std::string& check, const std::string& self,
                                       const std::vector<int>& gpus,
                                       int64_t xid_since_s) {
  const std::string word = FirstWord(check);
  if (word == "doctor" || word == "commtest") {
    std::vector<std::string> argv = {self};
    for (std::string_view w : Split(Trim(check), ' ')) {
      if (!Trim(w).empty()) argv.emplace_back(Trim(w));
    }
    argv.push_back("--json");
    if (word == "doctor" && !gpus.empty() && xid_since_s > 0 &&
        check.find("--xid-since") == std::string::npos) {
      argv.push_back("--xid-since");
      argv.push_back(std::to_string(xid_since_s) + "s");
    }
    for (int g : gpus) {
      argv.push_back("--gpu");
      argv.push_back(std::to_string(g));
    }
    return argv;
  }
  return {"/bin/sh", "-c", std::string(Trim(check))};
}

BurnInVerdict JudgeBurnInCheck(const std::string& check, int exit_code, int signal,
                               const std::string& stdout_text,
                               const std::string& stderr_text) {
  if (signal == 0 && (exit_code == 0 || exit_code == 1)) return {true, ""};
  BurnInVerdict v;
  const std::string word = FirstWord(check);
  if (signal == 0 && exit_code == 2 && (word == "doctor" || word == "commtest")) {
    v.reason = FirstFailItem(stdout_text);
  }
  if (v.reason.empty()) {
    v.reason = signal != 0 ? "killed by signal " + std::to_string(signal)
                           : "exit code " + std::to_string(exit_code);
    std::string last = LastLine(stderr_text);
    if (last.empty()) last = LastLine(stdout_text);
    if (!last.empty()) v.reason += ": " + last;
  }
  return v;
}

BurnInRunner::BurnInRunner(std::string self, std::string node, Done done,
                           const Clock* clock)
    : self_(std::move(self)),
      node_(std::move(node)),
      done_(std::move(done)),
      clock_(clock != nullptr ? clock : RealClock()) {
  thread_ = std::thread([this] { Loop(); });
}

BurnInRunner::~BurnInRunner() { Stop(); }

void BurnInRunner::Start(api::BurnInWork run) {
  MutexLock lock(&mu_);
  next_ = std::move(run);
  cv_.SignalAll();
}

void BurnInRunner::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void BurnInRunner::Loop() {
  for (;;) {
    api::BurnInWork run;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && !next_.has_value()) cv_.Wait();
      if (stopping_) return;
      run = std::move(*next_);
      next_.reset();
      current_run_ = run.run;
    }
    std::fprintf(stderr, "hachi agent: burn-in run %d: %zu check(s)%s\n", run.run,
                 run.checks.size(), run.gpus.empty() ? "" : " of some GPUs");
    const int64_t started = clock_->MonotonicMs();
    const int64_t deadline = started + run.timeout * 1000;
    api::BurnInReport report;
    report.run = run.run;
    report.passed = true;
    bool cut = false;
    for (const std::string& check : run.checks) {
      int exit_code = 0, signal = 0;
      bool timed_out = false;
      std::string out, err;
      // A GPU's run: the Xid lines since it began, with a margin for the way from the
      // admin's resume to here.
      const int64_t xid_since = (clock_->MonotonicMs() - started) / 1000 + kXidMarginS;
      if (!RunCheck(BurnInCommand(check, self_, run.gpus, xid_since), run.gpus, deadline,
                    run.run, &exit_code, &signal, &out, &err, &timed_out)) {
        cut = true;
        break;
      }
      BurnInVerdict v = JudgeBurnInCheck(check, exit_code, signal, out, err);
      if (timed_out) {
        v = {false, "timed out after " + std::to_string(run.timeout) + " s"};
      }
      std::fprintf(stderr, "hachi agent: burn-in run %d: %s: %s\n", run.run,
                   check.c_str(), v.passed ? "passed" : v.reason.c_str());
      if (!v.passed) {
        report.passed = false;
        report.check = check;
        report.reason = v.reason.empty() ? "failed" : v.reason;
        break;
      }
    }
    if (!cut) done_(report);
  }
}

bool BurnInRunner::RunCheck(const std::vector<std::string>& argv,
                            const std::vector<int>& gpus, int64_t deadline_ms, int run,
                            int* exit_code, int* signal, std::string* out_text,
                            std::string* err_text, bool* timed_out) {
  // Everything the child needs, made before fork (a threaded parent's child may only
  // make async-signal-safe calls).
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "HACHI_NODE=", 11) != 0 &&
        std::strncmp(*e, "HACHI_BURN_IN_GPUS=", 19) != 0) {
      env_strings.emplace_back(*e);
    }
  }
  std::string gpu_list;
  for (int g : gpus) gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(g);
  env_strings.push_back("HACHI_NODE=" + node_);
  env_strings.push_back("HACHI_BURN_IN_GPUS=" + gpu_list);
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    *exit_code = 127;
    *err_text = std::string("pipe: ") + std::strerror(errno);
    return true;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    *exit_code = 127;
    *err_text = std::string("pipe: ") + std::strerror(errno);
    return true;
  }
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    syscall(SYS_close_range, 3U, ~0U, 0U);
    execve(args[0], args.data(), envp.data());
    static const char kMsg[] = "exec failed\n";
    (void)!write(2, kMsg, sizeof kMsg - 1);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  if (devnull >= 0) close(devnull);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    *exit_code = 127;
    *err_text = std::string("fork: ") + std::strerror(errno);
    return true;
  }
  setpgid(pid, pid);  // also here: no window in which a kill of the group misses it
  SetNonBlocking(out[0]);
  SetNonBlocking(err[0]);
  bool superseded = false;
  bool out_open = true, err_open = true;
  char buf[65536];
  // Drains what `fd` has now; false once every writer closed it.
  auto drain = [&](int fd, std::string* text) {
    for (;;) {
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        Append(text, buf, static_cast<size_t>(n));
        continue;
      }
      return n != 0;  // 0: end of file; -1: EAGAIN (still open) or an error
    }
  };
  while (out_open || err_open) {
    {
      MutexLock lock(&mu_);
      superseded = stopping_ || (next_.has_value() && next_->run != run);
    }
    if (superseded) break;
    if (clock_->MonotonicMs() >= deadline_ms) {
      *timed_out = true;
      break;
    }
    pollfd p[2] = {{out_open ? out[0] : -1, POLLIN, 0},
                   {err_open ? err[0] : -1, POLLIN, 0}};
    if (poll(p, 2, 100) < 0 && errno != EINTR) break;
    // Open until every writer closed: the check and whatever it started.
    if (out_open) out_open = drain(out[0], out_text);
    if (err_open) err_open = drain(err[0], err_text);
  }
  if (out_open || err_open) kill(-pid, SIGKILL);  // cut short: the check and its children
  close(out[0]);
  close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (superseded) return false;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  *signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return true;
}

}  // namespace hachi::agent
