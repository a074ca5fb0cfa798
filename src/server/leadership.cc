#include "server/leadership.h"

#include <algorithm>
#include <utility>

namespace hachi::server {
namespace {

using std::chrono::milliseconds;

// What the leader keeps off its lease's end: a renewal is timed from before it was sent,
// so the database's deadline is later than ours by the round trip at least; the margin
// covers the two clocks' rates.
int64_t MarginMs(milliseconds lease) {
  return std::min<int64_t>(500, lease.count() / 10);
}

}  // namespace

Leadership::Leadership(LeaseRow* row, const Clock* clock, LeadershipOptions options,
                       Elect elect, Depose depose, Log log)
    : row_(row),
      clock_(clock),
      options_(std::move(options)),
      elect_(std::move(elect)),
      depose_(std::move(depose)),
      log_(std::move(log)) {}

Leadership::~Leadership() { Stop(); }

void Leadership::Start() {
  thread_ = std::thread([this] {
    for (;;) {
      const milliseconds wait = Step();
      MutexLock lock(&mu_);
      if (stopping_) return;
      // Deposed() wakes it early; otherwise the round's interval.
      if (deposed_epoch_ == 0 || deposed_epoch_ != epoch_) cv_.WaitFor(wait);
      if (stopping_) return;
    }
  });
}

void Leadership::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  MutexLock round(&round_mu_);
  int64_t epoch = 0;
  {
    MutexLock lock(&mu_);
    epoch = epoch_;
  }
  if (epoch == 0) return;
  StepDown(epoch, "the server is stopping");
  // The lease goes now, not at its end: a standby takes over at its next try.
  if (Status s = row_->Release(epoch); !s.ok()) {
    log_("could not give the lease of epoch " + std::to_string(epoch) +
         " back (a standby takes over when it lapses): " + s.message());
  }
}

void Leadership::Deposed(int64_t epoch, const std::string& why) {
  {
    MutexLock lock(&mu_);
    if (epoch == 0 || epoch != epoch_) return;
    deposed_epoch_ = epoch;
    deposed_why_ = why;
  }
  cv_.SignalAll();
}

Leadership::View Leadership::view() const {
  MutexLock lock(&mu_);
  View v;
  v.epoch = epoch_;
  v.leader = epoch_ != 0 ? options_.address : leader_;
  return v;
}

milliseconds Leadership::Step() {
  MutexLock round(&round_mu_);
  int64_t epoch = 0;
  std::string deposed;
  bool expired = false;
  {
    MutexLock lock(&mu_);
    if (stopping_) return options_.retry;
    epoch = epoch_;
    if (epoch != 0 && deposed_epoch_ == epoch) deposed = deposed_why_;
    expired = epoch != 0 && clock_->MonotonicMs() >= valid_until_ms_;
  }
  if (epoch == 0) return TryLead();
  if (!deposed.empty()) {
    StepDown(epoch, deposed);
    return options_.retry;
  }
  if (expired) {
    StepDown(epoch, "the lease of epoch " + std::to_string(epoch) +
                        " could not be renewed before its end (the database is "
                        "unreachable)");
    return options_.retry;
  }
  return Renew(epoch);
}

milliseconds Leadership::TryLead() {
  const int64_t sent = clock_->MonotonicMs();
  LeaseHolder current;
  const Result<std::optional<int64_t>> won = row_->TryAcquire(
      options_.address, static_cast<int>(options_.lease.count()), &current);
  if (!won.ok()) {
    MutexLock lock(&mu_);
    leader_.clear();  // unknown: clients go round the list
    return options_.retry;
  }
  if (!won->has_value()) {
    MutexLock lock(&mu_);
    leader_ = current.remaining_ms > 0 ? current.address : "";
    // A lease that ends sooner than our interval: try right after its end.
    return std::clamp(milliseconds(current.remaining_ms + 1), milliseconds(1),
                      options_.retry);
  }
  const int64_t epoch = **won;
  {
    MutexLock lock(&mu_);
    epoch_ = epoch;
    valid_until_ms_ = sent + options_.lease.count() - MarginMs(options_.lease);
    deposed_epoch_ = 0;
    leader_.clear();
  }
  log_("leading as epoch " + std::to_string(epoch));
  if (Status s = elect_(epoch); !s.ok()) {
    log_("could not start epoch " + std::to_string(epoch) + ": " + s.message());
    StepDown(epoch, "its start failed");
    if (Status r = row_->Release(epoch); !r.ok()) {
      log_("could not give the lease back: " + r.message());
    }
    return options_.retry;
  }
  // The start (the state's Load) took time off the lease: renew at once.
  return milliseconds(0);
}

milliseconds Leadership::Renew(int64_t epoch) {
  const int64_t sent = clock_->MonotonicMs();
  const Result<bool> renewed =
      row_->Renew(epoch, static_cast<int>(options_.lease.count()));
  if (renewed.ok() && *renewed) {
    MutexLock lock(&mu_);
    valid_until_ms_ = sent + options_.lease.count() - MarginMs(options_.lease);
    return options_.renew;
  }
  if (renewed.ok()) {
    StepDown(epoch, "the lease of epoch " + std::to_string(epoch) +
                        " was taken over or had lapsed");
    return options_.retry;
  }
  // The database did not answer: try again soon, until the lease's end on our clock.
  int64_t left = 0;
  {
    MutexLock lock(&mu_);
    left = valid_until_ms_ - clock_->MonotonicMs();
  }
  return std::clamp(milliseconds(left), milliseconds(0),
                    std::min(options_.retry, options_.renew));
}

void Leadership::StepDown(int64_t epoch, const std::string& reason) {
  {
    MutexLock lock(&mu_);
    if (epoch_ != epoch) return;
    epoch_ = 0;
    deposed_epoch_ = 0;
    deposed_why_.clear();
    valid_until_ms_ = 0;
  }
  log_("stepping down from epoch " + std::to_string(epoch) + ": " + reason);
  depose_(reason);
}

}  // namespace hachi::server
