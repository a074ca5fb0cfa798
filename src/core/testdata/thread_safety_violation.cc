// Must NOT compile under scripts/analyze.sh: it reads a GUARDED_BY member without its
// mutex and calls a REQUIRES function unlocked. The script checks that clang refuses
// this file, so a build where the analysis is silently off fails instead of passing.
#include "core/mutex.h"

namespace {

class Counter {
 public:
  int Peek() const { return value_; }  // no lock: the analysis must refuse this
  void Bump() {
    hachi::MutexLock lock(&mu_);
    BumpLocked();
  }
  void BumpUnlocked() { BumpLocked(); }  // nor this

 private:
  void BumpLocked() REQUIRES(mu_) { ++value_; }
  mutable hachi::Mutex mu_;
  int value_ GUARDED_BY(mu_) = 0;
};

}  // namespace

int main() {
  Counter c;
  c.Bump();
  c.BumpUnlocked();
  return c.Peek();
}
