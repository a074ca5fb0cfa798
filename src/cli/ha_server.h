// HaServer: `hachi server --store postgresql://...`, one of several controllers on one
// database (docs/ha.md). It runs the election (server/leadership.h) on the database's
// lease row and, by turns:
//   - a standby: its HTTP listeners answer every request 503, naming the leader; it
//     keeps a copy of the state, following the changes (state/pg_follow.h) every retry
//     interval, so that a takeover reads only what changed since;
//   - a leader: the term StartTerm builds — the state from the followed copy (or loaded
//     from the database when there is none), the
//     store fenced by the term's epoch, the controller and its HTTP API on the same
//     listeners, every reply carrying the epoch — until the term ends (the lease lost or
//     not renewed in time, a write refused by the epoch check); then a standby again.
//
// Thread-safety: Start and Stop from one thread; the terms start and stop on the
// election's thread; the copy is followed on a thread of its own.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/mutex.h"
#include "core/status.h"
#include "server/http_api.h"
#include "server/leadership.h"

namespace hachi::state {
class LeaderLease;
class PgFollower;
struct StateImage;
}  // namespace hachi::state

namespace hachi::cli {

class HaServer {
 public:
  // A running term: its destructor stops it (controller, then HTTP).
  class Term {
   public:
    virtual ~Term() = default;
  };
  // Starts the term of `epoch`; `deposed` is the store's on_deposed (a write refused);
  // `warm` the store's first_load (the followed copy, brought up to date; empty when
  // there is none).
  using StartTerm = std::function<Result<std::unique_ptr<Term>>(
      int64_t epoch, std::function<void(const Status&)> deposed,
      std::function<Result<state::StateImage>()> warm)>;

  struct Options {
    std::string conninfo;                  // the database (libpq's URI)
    server::LeadershipOptions leadership;  // our advertised address, the lease's times
    server::HttpOptions standby;           // where a standby answers: the term's
                                           // listeners (listen, socket, TLS)
  };

  // Opens the lease row's connection and starts as a standby (the first round of the
  // election runs at once: with no leader, we lead within a moment).
  static Result<std::unique_ptr<HaServer>> Start(Options options, StartTerm start_term);
  ~HaServer();  // Stop()
  HaServer(const HaServer&) = delete;
  HaServer& operator=(const HaServer&) = delete;

  // Ends the term (the lease given back: a standby takes over at its next try) and the
  // standby's listeners. Idempotent.
  void Stop();

 private:
  class Row;  // server::LeaseRow over state::LeaderLease

  HaServer(Options options, StartTerm start_term);
  Status Elect(int64_t epoch) EXCLUDES(mu_);
  void Depose(const std::string& reason) EXCLUDES(mu_);
  Status StartStandby() REQUIRES(mu_);
  void Follow() EXCLUDES(follow_mu_);  // the follower's thread

  const Options options_;
  const StartTerm start_term_;
  std::unique_ptr<state::LeaderLease> lease_;
  std::unique_ptr<Row> row_;
  std::unique_ptr<server::Leadership> leadership_;

  Mutex mu_;
  std::unique_ptr<Term> term_ GUARDED_BY(mu_);
  std::unique_ptr<server::HttpServer> standby_ GUARDED_BY(mu_);

  // The standby's copy of the state; null when it could not be opened (a term then
  // loads every row).
  std::unique_ptr<state::PgFollower> follower_;
  std::atomic<bool> leading_{false};  // a term runs (or starts): nothing to follow
  Mutex follow_mu_;
  CondVar follow_cv_{&follow_mu_};
  bool stopping_ GUARDED_BY(follow_mu_) = false;
  std::thread follow_thread_;
};

}  // namespace hachi::cli
