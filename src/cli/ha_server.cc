#include "cli/ha_server.h"

#include <unistd.h>

#include <iostream>
#include <random>
#include <utility>

#include "state/leader_lease.h"
#include "state/pg_follow.h"

namespace hachi::cli {
namespace {

// This process among the controllers: host, pid and a random part (a pid is reused
// after a restart; the lease must not think a new process is its predecessor).
std::string HolderId() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) | rd();
  char tail[17];
  std::snprintf(tail, sizeof tail, "%016llx", static_cast<unsigned long long>(r));
  return std::string(host[0] ? host : "localhost") + ":" + std::to_string(::getpid()) +
         ":" + tail;
}

void Say(const std::string& line) { std::cerr << "hachi server: " << line << "\n"; }

}  // namespace

class HaServer::Row final : public server::LeaseRow {
 public:
  explicit Row(state::LeaderLease* lease) : lease_(lease) {}
  Result<std::optional<int64_t>> TryAcquire(const std::string& address, int lease_ms,
                                            server::LeaseHolder* current) override {
    state::LeaderInfo info;
    Result<std::optional<int64_t>> won = lease_->TryAcquire(address, lease_ms, &info);
    *current =
        server::LeaseHolder{info.epoch, info.holder, info.address, info.remaining_ms};
    return won;
  }
  Result<bool> Renew(int64_t epoch, int lease_ms) override {
    return lease_->Renew(epoch, lease_ms);
  }
  Status Release(int64_t epoch) override { return lease_->Release(epoch); }

 private:
  state::LeaderLease* const lease_;
};

HaServer::HaServer(Options options, StartTerm start_term)
    : options_(std::move(options)), start_term_(std::move(start_term)) {}

HaServer::~HaServer() { Stop(); }

Result<std::unique_ptr<HaServer>> HaServer::Start(Options options, StartTerm start_term) {
  std::unique_ptr<HaServer> s(new HaServer(std::move(options), std::move(start_term)));
  Result<std::unique_ptr<state::LeaderLease>> lease =
      state::LeaderLease::Open(s->options_.conninfo, HolderId());
  if (!lease.ok()) return lease.status();
  s->lease_ = std::move(*lease);
  // A renewal that hangs must not outlive the lease it renews.
  HACHI_RETURN_IF_ERROR(s->lease_->SetStatementTimeout(
      static_cast<int>(std::max<int64_t>(100, s->options_.leadership.renew.count()))));
  s->row_ = std::make_unique<Row>(s->lease_.get());
  // Without a copy a takeover still works, reading every row: say so and go on.
  Result<std::unique_ptr<state::PgFollower>> follower =
      state::PgFollower::Open(s->options_.conninfo);
  if (follower.ok()) {
    s->follower_ = std::move(*follower);
  } else {
    Say("a standby will not keep a copy of the state: " + follower.status().message());
  }
  HaServer* self = s.get();
  s->leadership_ = std::make_unique<server::Leadership>(
      s->row_.get(), RealClock(), s->options_.leadership,
      [self](int64_t epoch) { return self->Elect(epoch); },
      [self](const std::string& reason) { self->Depose(reason); }, Say);
  {
    MutexLock lock(&s->mu_);
    HACHI_RETURN_IF_ERROR(s->StartStandby());
  }
  s->leadership_->Start();
  if (s->follower_) s->follow_thread_ = std::thread([self] { self->Follow(); });
  return s;
}

void HaServer::Follow() {
  const Clock* clock = RealClock();
  bool failing = false;
  MutexLock lock(&follow_mu_);
  while (!stopping_) {
    if (!leading_.load()) {
      lock.Unlock();
      const int64_t t0 = clock->MonotonicMs();
      const int64_t full_before = follower_->stats().full_reads;
      Status s = follower_->CatchUp();
      const state::FollowStats st = follower_->stats();
      if (!s.ok() && !failing) {
        Say("cannot follow the state (a takeover will read every row): " + s.message());
      } else if (s.ok() && st.full_reads > full_before) {
        // Every row, read after a start or a term: worth a line, as a leader's Load is.
        Say("following the state: " + std::to_string(st.jobs) + " jobs read in " +
            std::to_string(clock->MonotonicMs() - t0) + " ms");
      }
      failing = !s.ok();
      lock.Lock();
    }
    follow_cv_.WaitFor(options_.leadership.retry);
  }
}

void HaServer::Stop() {
  {
    MutexLock lock(&follow_mu_);
    stopping_ = true;
  }
  follow_cv_.SignalAll();
  if (follow_thread_.joinable()) follow_thread_.join();
  if (leadership_) leadership_->Stop();  // ends the term, gives the lease back
  MutexLock lock(&mu_);
  if (standby_) standby_->Stop();
  standby_.reset();
}

Status HaServer::StartStandby() {
  server::HttpOptions o = options_.standby;
  server::Leadership* leadership = leadership_.get();
  o.leader = [leadership] { return leadership->view().leader; };
  o.epoch = 0;
  auto standby = std::make_unique<server::HttpServer>(nullptr, o);
  HACHI_RETURN_IF_ERROR(standby->Start());
  standby_ = std::move(standby);
  return Status::Ok();
}

Status HaServer::Elect(int64_t epoch) {
  server::Leadership* leadership = leadership_.get();
  auto deposed = [leadership, epoch](const Status& why) {
    leadership->Deposed(epoch, why.message());
  };
  leading_.store(true);
  std::function<Result<state::StateImage>()> warm;
  if (follower_) {
    state::PgFollower* follower = follower_.get();
    warm = [follower]() -> Result<state::StateImage> {
      const int64_t t0 = RealClock()->MonotonicMs();
      Result<state::StateImage> image = follower->Take();
      if (image.ok()) {
        const state::FollowStats st = follower->stats();
        Say("the state from this standby's copy: " + std::to_string(image->jobs.size()) +
            " jobs; " + std::to_string(st.rows_last) +
            " rows read since its last look, in " +
            std::to_string(RealClock()->MonotonicMs() - t0) + " ms");
      }
      return image;
    };
  }
  MutexLock lock(&mu_);
  // The term's listeners are the standby's: free them first.
  if (standby_) standby_->Stop();
  standby_.reset();
  Result<std::unique_ptr<Term>> term = start_term_(epoch, deposed, std::move(warm));
  if (!term.ok()) {
    leading_.store(false);
    Status restarted = StartStandby();
    if (!restarted.ok()) Say("cannot answer as a standby: " + restarted.message());
    return term.status();
  }
  term_ = std::move(*term);
  return Status::Ok();
}

void HaServer::Depose(const std::string& reason) {
  (void)reason;  // Leadership said it
  MutexLock lock(&mu_);
  term_.reset();  // the controller stops: no more scheduling, dispatching or writes
  leading_.store(false);
  follow_cv_.SignalAll();  // a standby again: follow from now
  if (Status s = StartStandby(); !s.ok()) {
    Say("cannot answer as a standby: " + s.message());
  }
}

}  // namespace hachi::cli
