#include "cli/interactive.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "api/output_paths.h"
#include "api/protocol_json.h"
#include "api/record_json.h"
#include "cli/slurm/srun_plan.h"

extern char** environ;

namespace hachi::cli {
namespace {

std::atomic<int> g_interrupts{0};
std::atomic<bool> g_terminate{false};
std::atomic<bool> g_winch{false};

extern "C" void OnInteractiveInterrupt(int) { g_interrupts.fetch_add(1); }
extern "C" void OnInteractiveTerminate(int) { g_terminate.store(true); }
extern "C" void OnInteractiveWinch(int) { g_winch.store(true); }

// srun --pty's own terminal in raw mode while the step runs (every key goes to the
// remote terminal: Ctrl-C, Ctrl-Z, Ctrl-D are its to act on), restored at the end
// however RunStep returns.
class RawTerminal {
 public:
  RawTerminal() {
    if (!::isatty(0) || ::tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(0, TCSADRAIN, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(0, TCSADRAIN, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

// The window size of srun's terminal; false when it has none.
bool WindowSize(int* rows, int* cols) {
  winsize ws{};
  if (::ioctl(0, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) return false;
  *rows = ws.ws_row;
  *cols = ws.ws_col;
  return true;
}

// Sends what is typed (and the window's new size) to a --pty step until `stop`: on its
// own connection, so the output's long poll never delays a key.
void ForwardInput(const std::string& server, const std::string& base,
                  const std::atomic<bool>* stop) {
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  if (!c.ok()) return;
  bool stdin_open = true;
  char buf[4096];
  while (!stop->load()) {
    if (g_winch.exchange(false)) {
      api::StepInput in;
      if (WindowSize(&in.rows, &in.cols)) {
        (void)(*c)->Call("POST", base + "/input", api::StepInputRequestToJson(in));
      }
    }
    pollfd p{0, POLLIN, 0};
    if (!stdin_open || ::poll(&p, 1, 100) <= 0) {
      if (!stdin_open) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    const ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      stdin_open = false;  // the terminal's end is the remote side's Ctrl-D to send
      continue;
    }
    api::StepInput in;
    in.data.assign(buf, static_cast<size_t>(n));
    (void)(*c)->Call("POST", base + "/input", api::StepInputRequestToJson(in));
  }
}

// Without SA_RESTART, so that a wait in progress returns early.
void CatchSignals() {
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = OnInteractiveInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = OnInteractiveTerminate;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed pipe: SIGPIPE has its say
    done += static_cast<size_t>(n);
  }
}

int Error(const std::string& prog, const std::string& message) {
  std::cerr << prog << ": error: " << message << "\n";
  return 1;
}

}  // namespace

state::EnvList ProcessEnvironment() {
  state::EnvList env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  AddUmask(&env);
  return env;
}

void AddUmask(state::EnvList* env) {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  std::erase_if(*env, [](const auto& kv) { return kv.first == api::kUmaskVariable; });
  env->emplace_back(api::kUmaskVariable, api::UmaskText(mask));
}

std::string WorkingDirectory() {
  char buf[PATH_MAX];
  if (::getcwd(buf, sizeof buf) != nullptr) return buf;
  const char* pwd = std::getenv("PWD");
  return pwd != nullptr ? pwd : "/";
}

Result<state::JobRecord> Allocate(ApiClient& c, api::SubmitRequest request,
                                  const std::string& prog, bool announce) {
  request.spec.interactive = true;
  request.spec.SetPayload({.script = "", .env = request.spec.env(), .argv = {}});
  Result<std::vector<state::JobId>> ids = c.Submit(request);
  if (!ids.ok()) {
    return Status(ids.status().code(),
                  "Job submit/allocate failed: " + ids.status().message());
  }
  const state::JobId id = ids->front();
  if (announce) std::cerr << prog << ": Pending job allocation " << id << "\n";
  CatchSignals();
  std::string state = "PENDING";
  bool said_queued = false;
  for (;;) {
    if (g_interrupts.load() > 0 || g_terminate.load()) {
      (void)c.JobAction(id, "cancel");
      return Unavailable("Job allocation " + std::to_string(id) + " has been revoked");
    }
    Result<JobView> v = c.Job(id, state, 500);
    if (!v.ok()) return v.status();
    state = std::string(state::JobStateName(v->job.state));
    if (v->job.state == state::JobState::kRunning) {
      if (said_queued) {
        std::cerr << prog << ": job " << id << " has been allocated resources\n";
      }
      if (announce) std::cerr << prog << ": Granted job allocation " << id << "\n";
      return v->job;
    }
    if (state::IsFinal(v->job.state)) {
      return Unavailable("job allocation " + std::to_string(id) + " ended " + state +
                         (v->job.reason.empty() ? "" : ": " + v->job.reason));
    }
    if (!said_queued && !v->job.reason.empty()) {
      std::cerr << prog << ": job " << id << " queued and waiting for resources ("
                << v->job.reason << (v->diagnosis.empty() ? "" : ": " + v->diagnosis)
                << ")\n";
      said_queued = true;
    }
  }
}

int RunStep(ApiClient& c, const std::string& server, state::JobId job,
            api::StepRequest request, bool label, bool quiet, const std::string& prog) {
  const std::string jid = std::to_string(job);
  if (request.pty) WindowSize(&request.rows, &request.cols);
  Result<std::string> created =
      c.Call("POST", "/jobs/" + jid + "/steps", api::StepRequestToJson(request));
  if (!created.ok()) {
    return Error(
        prog, "Unable to create step for job " + jid + ": " + created.status().message());
  }
  const nlohmann::json reply = nlohmann::json::parse(*created, nullptr, false);
  if (!reply.is_object() || !reply.contains("step")) {
    return Error(prog, "the server's reply to the step is not understood");
  }
  Result<state::StepRecord> step = api::StepRecordFromJson(reply["step"].dump());
  if (!step.ok()) return Error(prog, step.status().message());
  FollowOptions follow;
  follow.label = label;
  follow.quiet = quiet;
  follow.pty = request.pty;
  follow.run = step->job_start;
  return FollowStep(c, server, job, step->step, follow, prog);
}

int FollowStep(ApiClient& c, const std::string& server, state::JobId job, int step_number,
               const FollowOptions& options, const std::string& prog) {
  const bool label = options.label, quiet = options.quiet;
  const std::string jid = std::to_string(job);
  const std::string id = jid + "." + std::to_string(step_number);
  const std::string base = "/jobs/" + jid + "/steps/" + std::to_string(step_number);
  CatchSignals();
  const int interrupts_before = g_interrupts.load();
  // --pty: raw mode, and the keys to the step on a thread of their own.
  std::optional<RawTerminal> raw;
  std::atomic<bool> stop_input{false};
  std::thread input;
  if (options.pty) {
    struct sigaction sa {};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = OnInteractiveWinch;
    sigaction(SIGWINCH, &sa, nullptr);
    raw.emplace();
    input = std::thread(ForwardInput, server, base, &stop_input);
  }
  struct JoinInput {
    std::atomic<bool>* stop;
    std::thread* t;
    ~JoinInput() {
      stop->store(true);
      if (t->joinable()) t->join();
    }
  } join_input{&stop_input, &input};

  slurm::OutputLabeler labeler(label);
  slurm::LostOutput lost;
  int64_t next = 0;
  int seen_interrupts = interrupts_before;
  auto last_interrupt = std::chrono::steady_clock::now() - std::chrono::hours(1);
  bool cancelled = false;
  auto retry_until = std::chrono::steady_clock::time_point::max();
  for (;;) {
    // An observer (sattach) leaves on Ctrl-C or SIGTERM; the step runs on.
    if (options.observe &&
        (g_interrupts.load() != interrupts_before || g_terminate.load())) {
      return 0;
    }
    // Ctrl-C once: to the tasks. Twice within a second, or SIGTERM: the step stops.
    if (const int n = g_interrupts.load(); n != seen_interrupts) {
      seen_interrupts = n;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_interrupt < std::chrono::seconds(1) && !cancelled) {
        std::cerr << prog << ": forcing job termination\n";
        cancelled = true;
        (void)c.Call("POST", base + "/cancel", "");
      } else if (!cancelled) {
        std::cerr << prog << ": sending Ctrl-C to StepId=" << id << "\n";
        (void)c.Call("POST", base + "/signal", R"({"signal":"INT"})");
      }
      last_interrupt = now;
    }
    if (g_terminate.load() && !cancelled) {
      cancelled = true;
      std::cerr << prog << ": forcing job termination\n";
      (void)c.Call("POST", base + "/cancel", "");
    }
    Result<std::string> body = c.Call(
        "GET",
        base + "/output?from=" + std::to_string(next) + "&wait_ms=500" +
            (options.run > 0 ? "&run=" + std::to_string(options.run) : std::string()) +
            (options.observe ? "&observe=1" : ""));
    if (!body.ok()) {
      // The server restarting, a network blink: ask again from where we are; what the
      // server still holds comes then.
      if (body.status().code() == StatusCode::kUnavailable) {
        const auto now = std::chrono::steady_clock::now();
        if (retry_until == std::chrono::steady_clock::time_point::max()) {
          retry_until = now + std::chrono::minutes(5);
          std::cerr << prog << ": " << body.status().message() << "; retrying\n";
        }
        if (now < retry_until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          continue;
        }
      }
      return Error(prog, "step " + id + ": " + body.status().message());
    }
    retry_until = std::chrono::steady_clock::time_point::max();
    Result<api::StepOutput> out = api::StepOutputFromJson(*body);
    if (!out.ok()) return Error(prog, out.status().message());
    // An observer attaching sees the output the server still keeps; what went before is
    // not lost to it.
    if (options.observe && next == 0) out->lost = 0;
    lost.Count(*out);
    if (out->lost > 0) {
      std::cerr << prog << ": warning: " << out->lost
                << " bytes of the step's output were dropped by the server before they "
                   "were read\n";
    }
    for (const api::OutputChunk& chunk : out->chunks) {
      auto [to_out, to_err] = labeler.Feed(chunk);
      WriteAll(1, to_out);
      WriteAll(2, to_err);
    }
    next = out->next;
    if (!out->done) continue;
    auto [to_out, to_err] = labeler.Flush();
    WriteAll(1, to_out);
    WriteAll(2, to_err);
    raw.reset();  // srun's own lines on a terminal as it was
    if (!quiet) {
      for (const std::string& line : slurm::TaskErrorLines(out->exits)) {
        std::cerr << (prog == "srun" ? line : prog + line.substr(4)) << "\n";
      }
    }
    // Said even with --quiet: it is why the exit status fails.
    if (lost.bytes() > 0) std::cerr << lost.Line(prog) << "\n";
    if (!out->exits.empty()) return lost.ExitStatus(slurm::SrunExitStatus(out->exits));
    // Ended without its tasks' word (the job ended, its node was lost).
    if (!quiet && !out->step.reason.empty()) {
      std::cerr << prog << ": error: StepId=" << id << " "
                << state::JobStateName(out->step.state) << ": " << out->step.reason
                << "\n";
    }
    if (out->step.state == state::JobState::kCompleted) return lost.ExitStatus(0);
    return out->step.exit_code != 0 ? out->step.exit_code : 1;
  }
}

Status Relinquish(ApiClient& c, state::JobId job, int exit_code) {
  Result<std::string> r =
      c.Call("POST", "/jobs/" + std::to_string(job) + "/complete",
             "{\"exit_code\":" + std::to_string(std::clamp(exit_code, 0, 255)) + "}");
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace hachi::cli
