// AgentHub: the controller's side of the agent channel (DESIGN.md §3 "agent gets the
// launch"). For each node it keeps the work waiting for that node's agent (launches,
// cancels), whether the agent is registered, and when it was last heard from; an
// agent's work long poll (which is also its heartbeat) waits here, on a wake-up of its
// own node, and never on the Controller's lock. So a launch wakes the one poll it is
// for, not every agent's, and a thousand waiting polls hold no lock the API needs.
//
// The Controller decides what to queue (under its own lock) and the hub only carries it:
// it never calls back into the Controller. Lock order: Controller::mu_, then the hub's.
//
// Thread-safety: every method may be called from any thread at any time; one mutex
// guards the sessions, and each session has its own condition variable.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/launch_spec.h"
#include "api/protocol.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "state/records.h"

namespace hachi::server {

// The topic an agent's parked work poll waits on (server/http_loop.h).
std::string AgentTopic(const std::string& node);

class AgentHub {
 public:
  explicit AgentHub(const Clock* clock) : clock_(clock) {}

  // Called (with the hub's lock held: it must only queue) with AgentTopic(node) whenever
  // a Wait for `node` would now return something: work queued, closed, stopping.
  void SetNotifier(std::function<void(const std::string&)> notify) EXCLUDES(mu_);
  AgentHub(const AgentHub&) = delete;
  AgentHub& operator=(const AgentHub&) = delete;

  // The node's agent registered: a fresh session (work queued for its predecessor is
  // dropped), seen now.
  void Open(const std::string& node) EXCLUDES(mu_);
  // The node is lost (silent past the timeout): its queued work is dropped and its poll
  // answers "register again" (now, if one is waiting).
  void Close(const std::string& node) EXCLUDES(mu_);
  bool IsOpen(const std::string& node) const EXCLUDES(mu_);

  // Heard from the node's agent (a report, a health message): seen now. Also for a node
  // known from the records whose agent has not registered with this server yet: not
  // open, but counted as seen now, so that it gets the agent timeout to come back.
  void Touch(const std::string& node) EXCLUDES(mu_);
  // Milliseconds since the node's agent was last heard from (by the Clock's monotonic
  // time); -1 for a node the hub has never seen.
  int64_t SilentForMs(const std::string& node) const EXCLUDES(mu_);

  // Queue work for an open node's agent and wake its poll. A closed node's work is
  // dropped (its agent must register first, and registration reconciles).
  void Launch(const std::string& node, api::LaunchSpec launch) EXCLUDES(mu_);
  void Cancel(const std::string& node, state::JobId job) EXCLUDES(mu_);
  void Signal(const std::string& node, api::JobSignal signal) EXCLUDES(mu_);
  // A running job's new time limit (scontrol update), as Signal.
  void SetLimit(const std::string& node, api::AgentWork::Limit limit) EXCLUDES(mu_);
  // Job steps: a node's part of a step, and a signal or cancel for one, as
  // Signal. A closed node's are dropped: a restarted agent never starts a step twice.
  void LaunchStep(const std::string& node, api::StepLaunch launch) EXCLUDES(mu_);
  void SignalStep(const std::string& node, api::StepSignal signal) EXCLUDES(mu_);
  // Burn-in: a run for the node's agent, replacing one not picked up yet.
  void BurnIn(const std::string& node, api::BurnInWork run) EXCLUDES(mu_);
  // A --pty step's typed bytes or window size, kept in order.
  void StepInput(const std::string& node, api::StepInput input) EXCLUDES(mu_);
  // Takes back `job`'s launch when the agent has not picked it up yet: true when there
  // was one (the job never ran there).
  bool TakeBackLaunch(const std::string& node, state::JobId job) EXCLUDES(mu_);

  // The long poll: waits up to `wait_ms` for work for `node` and returns it, marking an
  // open node seen on entry and exit. `reregister` at once when the node is not open
  // (and then it is not seen: an agent that cannot register goes down at the timeout).
  // Returns at once once Stop was called.
  api::AgentWork Wait(const std::string& node, int wait_ms) EXCLUDES(mu_);

  // Every poll returns now, and later ones at once.
  void Stop() EXCLUDES(mu_);

 private:
  struct Session {
    explicit Session(Mutex* mu) : wake(mu) {}
    bool open = false;
    int64_t last_seen_ms = 0;
    std::deque<api::LaunchSpec> launches;
    std::vector<state::JobId> cancels;
    std::vector<api::JobSignal> signals;
    std::vector<api::AgentWork::Limit> limits;
    std::vector<api::StepLaunch> steps;
    std::vector<api::StepSignal> step_signals;
    std::vector<api::StepInput> step_input;
    std::optional<api::BurnInWork> burn_in;
    CondVar wake;  // on mu_: work queued, closed, or stopping
  };
  // The node's session, made (closed) when missing. Sessions are never removed, so the
  // reference stays valid for as long as the hub lives.
  Session& SessionLocked(const std::string& node) REQUIRES(mu_);

  const Clock* const clock_;  // constant after construction

  mutable Mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Session>> sessions_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::function<void(const std::string&)> notify_ GUARDED_BY(mu_);
};

}  // namespace hachi::server
