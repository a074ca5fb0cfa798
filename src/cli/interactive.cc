#include "cli/interactive.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/protocol_json.h"
#include "api/record_json.h"
#include "cli/slurm/srun_plan.h"

extern char** environ;

namespace hachi::cli {
namespace {

std::atomic<int> g_interrupts{0};
std::atomic<bool> g_terminate{false};

extern "C" void OnInteractiveInterrupt(int) { g_interrupts.fetch_add(1); }
extern "C" void OnInteractiveTerminate(int) { g_terminate.store(true); }

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
  return env;
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
  request.spec.argv.clear();
  request.spec.SetPayload("", request.spec.env());
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

int RunStep(ApiClient& c, state::JobId job, const api::StepRequest& request, bool label,
            bool quiet, const std::string& prog) {
  const std::string jid = std::to_string(job);
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
  const std::string id = jid + "." + std::to_string(step->step);
  const std::string base = "/jobs/" + jid + "/steps/" + std::to_string(step->step);
  CatchSignals();
  const int interrupts_before = g_interrupts.load();

  slurm::OutputLabeler labeler(label);
  int64_t next = 0;
  int seen_interrupts = interrupts_before;
  auto last_interrupt = std::chrono::steady_clock::now() - std::chrono::hours(1);
  bool cancelled = false;
  auto retry_until = std::chrono::steady_clock::time_point::max();
  for (;;) {
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
    Result<std::string> body =
        c.Call("GET", base + "/output?from=" + std::to_string(next) + "&wait_ms=500");
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
    if (!quiet) {
      for (const std::string& line : slurm::TaskErrorLines(out->exits)) {
        std::cerr << (prog == "srun" ? line : prog + line.substr(4)) << "\n";
      }
    }
    if (!out->exits.empty()) return slurm::SrunExitStatus(out->exits);
    // Ended without its tasks' word (the job ended, its node was lost).
    if (!quiet && !out->step.reason.empty()) {
      std::cerr << prog << ": error: StepId=" << id << " "
                << state::JobStateName(out->step.state) << ": " << out->step.reason
                << "\n";
    }
    if (out->step.state == state::JobState::kCompleted) return 0;
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
