// Leadership: which of several `hachi server` processes on one PostgreSQL database is the
// controller (docs/ha.md). A lease row in the database (state/leader_lease.h), timed by
// the database's clock, names the leader and its epoch; a takeover increments the epoch.
// This class runs the election on its own thread:
//
//   standby  every `retry`, try to take the lease; once it has lapsed we win a new epoch
//            and `elect(epoch)` starts the controller of that term (Load, agents, HTTP).
//   leader   every `renew`, extend the lease. Lost (the row holds another epoch, or the
//            lease had lapsed), refused by the store (Deposed: a write's epoch check
//            failed), or not renewed by the lease's end on our own monotonic clock (the
//            database unreachable): `depose(reason)` stops the term at once, and we are
//            a standby again.
//
// The lease alone does not fence: a deposed leader may not know it yet. The store refuses
// its writes (every write transaction checks the epoch), the agents refuse its commands
// (they keep the highest epoch they have seen), and the local deadline above stops it
// dispatching at the latest when its lease could have passed to another.
//
// Thread-safety: Start/Stop from one thread; Deposed and leader() from any thread; Step
// is the thread's round (tests call it directly, with a FakeClock, never sleeping). The
// callbacks run on the leadership thread (or Stop's caller), never under mu_.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"

namespace hachi::server {

// The lease row as the election sees it (docs/ha.md). What holds or last held it.
struct LeaseHolder {
  int64_t epoch = 0;
  std::string holder;
  std::string address;       // the URL clients are sent to
  int64_t remaining_ms = 0;  // by the database's clock; <= 0: lapsed
};

// The lease row's operations (state::LeaderLease in production, a fake in tests).
class LeaseRow {
 public:
  virtual ~LeaseRow() = default;
  // The new epoch, or nullopt while another's lease runs (*current says whose).
  virtual Result<std::optional<int64_t>> TryAcquire(const std::string& address,
                                                    int lease_ms,
                                                    LeaseHolder* current) = 0;
  // false: the lease is another's, or had lapsed.
  virtual Result<bool> Renew(int64_t epoch, int lease_ms) = 0;
  // Lapses `epoch`'s lease now.
  virtual Status Release(int64_t epoch) = 0;
};

struct LeadershipOptions {
  std::string address;                    // our URL, as clients must be told it
  std::chrono::milliseconds lease{6000};  // how long a lease runs unrenewed
  std::chrono::milliseconds renew{2000};  // the leader renews this often
  std::chrono::milliseconds retry{1000};  // a standby tries to take over this often
};

class Leadership {
 public:
  // Starts the term of `epoch`; an error gives the lease back (we stay a standby).
  using Elect = std::function<Status(int64_t epoch)>;
  // Stops the current term (quickly: another may lead in a moment).
  using Depose = std::function<void(const std::string& reason)>;
  // One line for the log.
  using Log = std::function<void(const std::string& line)>;

  Leadership(LeaseRow* row, const Clock* clock, LeadershipOptions options, Elect elect,
             Depose depose, Log log);
  ~Leadership();  // Stop()
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  void Start();
  // Steps down (the term stopped, the lease released so a standby takes over at its
  // next try) and ends the thread. Idempotent.
  void Stop();

  // The store refused a write of `epoch`: step down at once (on the thread).
  void Deposed(int64_t epoch, const std::string& why);

  // Who leads as far as we know: ourselves (epoch() > 0) or the holder we last read;
  // for a standby's answer to clients.
  struct View {
    int64_t epoch = 0;   // ours while we lead, else 0
    std::string leader;  // the leader's address; "" when none holds the lease
  };
  View view() const;

  // One round at the clock's time: returns how long until the next. (The thread's body.)
  std::chrono::milliseconds Step();

 private:
  // The round's parts; each takes mu_ only to read or set the fields, never across the
  // lease row's I/O or a callback.
  std::chrono::milliseconds TryLead() REQUIRES(round_mu_) EXCLUDES(mu_);
  std::chrono::milliseconds Renew(int64_t epoch) REQUIRES(round_mu_) EXCLUDES(mu_);
  void StepDown(int64_t epoch, const std::string& reason) REQUIRES(round_mu_)
      EXCLUDES(mu_);

  // Constant after construction.
  LeaseRow* const row_;
  const Clock* const clock_;
  const LeadershipOptions options_;
  const Elect elect_;
  const Depose depose_;
  const Log log_;

  // Held across a round, its I/O and callbacks included: one round at a time, and Stop
  // waits for the one under way. epoch_ and valid_until_ms_ change only under it.
  Mutex round_mu_ ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  CondVar cv_{&mu_};
  int64_t epoch_ GUARDED_BY(mu_) = 0;  // ours while we lead
  // Until when (our monotonic clock, ms) the lease we last renewed surely runs: the
  // renewal's send time + the lease, less a margin.
  int64_t valid_until_ms_ GUARDED_BY(mu_) = 0;
  int64_t deposed_epoch_ GUARDED_BY(mu_) = 0;  // Deposed() named it; the round acts
  std::string deposed_why_ GUARDED_BY(mu_);
  std::string leader_ GUARDED_BY(mu_);  // the holder's address, when another leads
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hachi::server
