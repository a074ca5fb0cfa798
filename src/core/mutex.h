// A mutex, its scoped lock and a condition variable that Clang's thread-safety analysis
// understands (core/thread_annotations.h): libstdc++'s std::mutex carries no
// annotations, so members marked GUARDED_BY(mu_) are checked only when mu_ is one of
// these. Model: LevelDB port/port_stdcxx.h (Mutex, CondVar) and util/mutexlock.h.
//
// Thread-safety: as std::mutex / std::condition_variable, which they wrap.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "core/thread_annotations.h"

namespace hachi {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds it (where it cannot see that, e.g. a callback
  // run under the lock); checks nothing at run time.
  void AssertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope. Unlock() and Lock() let it go for a while and take it back
// (an fsync, a scheduling cycle) — the analysis follows both.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// Waits on `mu`, which the caller holds around every call (not annotated: the analysis
// cannot tie this object's mutex to the caller's name for it). No predicate overloads: a
// predicate lambda reads guarded state where the analysis cannot see the lock, so
// callers loop: `while (!ready_) { if (!cv_.WaitUntil(deadline)) break; }`.
class CondVar {
 public:
  using Clock = std::chrono::steady_clock;

  explicit CondVar(Mutex* mu) : mu_(mu) {}
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False when `deadline` passed (the caller re-checks its condition either way:
  // wake-ups may be spurious).
  bool WaitUntil(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  // WaitUntil(now + `timeout`): for a loop's interval, which is real time even where the
  // decision it serves reads a Clock (core/clock.h).
  bool WaitFor(std::chrono::milliseconds timeout) {
    return WaitUntil(Clock::now() + timeout);
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  Mutex* const mu_;
  std::condition_variable cv_;
};

}  // namespace hachi
