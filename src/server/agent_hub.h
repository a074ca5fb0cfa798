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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "api/launch_spec.h"
#include "api/protocol.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "state/records.h"

namespace hachi::server {

// The topic an agent's parked work poll waits on (server/http_loop.h).
std::string AgentTopic(const std::string& node);

// One piece of work for an agent: an item of one of api::AgentWork's lists.
using AgentItem =
    std::variant<api::LaunchSpec, api::RunStop, api::JobSignal, api::AgentWork::Limit,
                 api::StepLaunch, api::StepSignal, api::StepInput, api::BurnInWork>;

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

  // Queues `item` for an open node's agent and wakes its poll. A closed node's work is
  // dropped (its agent must register first, and registration reconciles): a restarted
  // agent never starts a step twice. A burn-in run replaces one not sent yet; a --pty
  // step's input keeps its order.
  void Send(const std::string& node, AgentItem item) EXCLUDES(mu_);
  // Takes back `job`'s launch when it has not been sent yet: true when there was one
  // (the job never ran there). A launch sent and not yet acknowledged is not taken back:
  // the agent may have started it.
  bool TakeBackLaunch(const std::string& node, state::JobId job) EXCLUDES(mu_);

  // The long poll: waits up to `wait_ms` for work for `node` and returns it, marking an
  // open node seen on entry and exit. `reregister` at once when the node is not open
  // (and then it is not seen: an agent that cannot register goes down at the timeout).
  // Returns at once once Stop was called.
  //
  // `ack` is the last batch (AgentWork::seq) the agent acted on, kNoAck from an agent
  // that does not acknowledge (it gets each item once, as before). When the batch last
  // sent is not the one acknowledged, its answer was lost: its items go out again, ahead
  // of what was queued since, under a new seq.
  static constexpr int64_t kNoAck = -1;
  api::AgentWork Wait(const std::string& node, int wait_ms, int64_t ack = kNoAck)
      EXCLUDES(mu_);

  // Every poll returns now, and later ones at once.
  void Stop() EXCLUDES(mu_);

 private:
  struct Session {
    explicit Session(Mutex* mu) : wake(mu) {}
    bool open = false;
    int64_t last_seen_ms = 0;
    api::AgentWork queued;  // not sent yet
    api::AgentWork sent;    // sent, not acknowledged (seq 0: nothing is)
    CondVar wake;           // on mu_: work queued, closed, or stopping
  };
  // Acts on the agent's `ack`: the batch sent is acknowledged, or put back ahead of the
  // queue.
  void AckLocked(Session& s, int64_t ack) REQUIRES(mu_);
  // Sets each launch's and limit's time_left as of `now` (the server's clock).
  static void StampTimeLeft(api::AgentWork* w, Time now);
  void WakeLocked(Session& s, const std::string& node) REQUIRES(mu_);
  // The node's session, made (closed) when missing. Sessions are never removed, so the
  // reference stays valid for as long as the hub lives.
  Session& SessionLocked(const std::string& node) REQUIRES(mu_);

  const Clock* const clock_;  // constant after construction

  mutable Mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Session>> sessions_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;  // hub-wide: a new session never reuses one
  std::function<void(const std::string&)> notify_ GUARDED_BY(mu_);
};

}  // namespace hachi::server
