#include "server/leadership.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hachi::server {
namespace {

using std::chrono::milliseconds;

// The lease row as PostgreSQL keeps it, on the test's clock (the database's).
class FakeRow final : public LeaseRow {
 public:
  explicit FakeRow(const FakeClock* clock) : clock_(clock) {}

  Result<std::optional<int64_t>> TryAcquire(const std::string& url, int lease_ms,
                                            LeaseHolder* current) override {
    if (!reachable) return Unavailable("database unreachable");
    if (clock_->MonotonicMs() < expires_ms) {
      *current = LeaseHolder{epoch, holder, address, expires_ms - clock_->MonotonicMs()};
      return std::optional<int64_t>();
    }
    ++epoch;
    holder = "me";
    address = url;
    expires_ms = clock_->MonotonicMs() + lease_ms;
    return std::optional<int64_t>(epoch);
  }
  Result<bool> Renew(int64_t e, int lease_ms) override {
    if (!reachable) return Unavailable("database unreachable");
    if (e != epoch || clock_->MonotonicMs() >= expires_ms) return false;
    expires_ms = clock_->MonotonicMs() + lease_ms;
    return true;
  }
  Status Release(int64_t e) override {
    if (!reachable) return Unavailable("database unreachable");
    ++releases;
    if (e == epoch) expires_ms = clock_->MonotonicMs();
    return Status::Ok();
  }
  // Another controller takes over (the lease must have lapsed for a real one).
  void TakenBy(const std::string& who, const std::string& url, int lease_ms) {
    ++epoch;
    holder = who;
    address = url;
    expires_ms = clock_->MonotonicMs() + lease_ms;
  }

  bool reachable = true;
  int64_t epoch = 0;
  std::string holder, address;
  int64_t expires_ms = 0;
  int releases = 0;

 private:
  const FakeClock* clock_;
};

class LeadershipTest : public ::testing::Test {
 protected:
  LeadershipTest() : row_(&clock_) {}

  std::unique_ptr<Leadership> Make(Status elect_status = Status::Ok()) {
    LeadershipOptions o;
    o.address = "http://10.0.0.1:8686";
    o.lease = milliseconds(6000);
    o.renew = milliseconds(2000);
    o.retry = milliseconds(1000);
    return std::make_unique<Leadership>(
        &row_, &clock_, o,
        [this, elect_status](int64_t epoch) {
          elected_.push_back(epoch);
          return elect_status;
        },
        [this](const std::string& reason) { deposed_.push_back(reason); },
        [this](const std::string& line) { log_.push_back(line); });
  }
  void Advance(int ms) { clock_.Advance(std::chrono::milliseconds(ms)); }

  FakeClock clock_;
  FakeRow row_;
  std::vector<int64_t> elected_;
  std::vector<std::string> deposed_;
  std::vector<std::string> log_;
};

TEST_F(LeadershipTest, TakesALapsedLeaseAndRenewsIt) {
  auto l = Make();
  EXPECT_EQ(l->Step(), milliseconds(0));  // won: renew at once
  ASSERT_EQ(elected_, std::vector<int64_t>{1});
  EXPECT_EQ(l->view().epoch, 1);
  EXPECT_EQ(l->view().leader, "http://10.0.0.1:8686");
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(l->Step(), milliseconds(2000));
    Advance(2000);
  }
  EXPECT_TRUE(deposed_.empty());
  EXPECT_EQ(row_.epoch, 1);
}

TEST_F(LeadershipTest, AStandbyWaitsForTheHoldersLeaseAndNamesIt) {
  row_.TakenBy("b", "http://10.0.0.2:8686", 6000);
  auto l = Make();
  EXPECT_EQ(l->Step(), milliseconds(1000));
  EXPECT_TRUE(elected_.empty());
  EXPECT_EQ(l->view().epoch, 0);
  EXPECT_EQ(l->view().leader, "http://10.0.0.2:8686");
  Advance(5500);
  // Half a second left: the next try comes right after the lease's end.
  EXPECT_EQ(l->Step(), milliseconds(501));
  Advance(501);
  l->Step();
  EXPECT_EQ(elected_, std::vector<int64_t>{2});  // the takeover's new epoch
}

TEST_F(LeadershipTest, ALeaseTakenOverStepsDownAtTheNextRenewal) {
  auto l = Make();
  l->Step();
  Advance(2000);
  row_.expires_ms = 0;  // say the renewal came too late, and another took it
  row_.TakenBy("b", "http://10.0.0.2:8686", 6000);
  l->Step();
  ASSERT_EQ(deposed_.size(), 1u);
  EXPECT_NE(deposed_[0].find("taken over"), std::string::npos) << deposed_[0];
  EXPECT_EQ(l->view().epoch, 0);
  l->Step();  // a standby now: it learns who leads
  EXPECT_EQ(l->view().leader, "http://10.0.0.2:8686");
}

TEST_F(LeadershipTest, AnUnreachableDatabaseEndsTheTermAtTheLeasesEndNotBefore) {
  auto l = Make();
  l->Step();  // leads from t=0: the lease surely runs to 6000 - 500 on our clock
  row_.reachable = false;
  int64_t waited = 0;
  for (int i = 0; i < 100 && deposed_.empty(); ++i) {
    const milliseconds next = l->Step();
    if (!deposed_.empty()) break;
    Advance(static_cast<int>(next.count()));
    waited += next.count();
  }
  ASSERT_EQ(deposed_.size(), 1u);
  EXPECT_EQ(waited, 5500);
  EXPECT_NE(deposed_[0].find("unreachable"), std::string::npos) << deposed_[0];
}

TEST_F(LeadershipTest, ADatabaseBackWithinTheLeaseKeepsTheTerm) {
  auto l = Make();
  l->Step();
  row_.reachable = false;
  Advance(2000);
  l->Step();
  Advance(1000);
  l->Step();
  row_.reachable = true;
  Advance(1000);
  EXPECT_EQ(l->Step(), milliseconds(2000));
  EXPECT_TRUE(deposed_.empty());
  EXPECT_EQ(l->view().epoch, 1);
}

TEST_F(LeadershipTest, AWriteRefusedByTheStoreStepsDownAtOnce) {
  auto l = Make();
  l->Step();
  l->Deposed(7, "another epoch's refusal is not ours");
  l->Step();
  EXPECT_TRUE(deposed_.empty());
  l->Deposed(1, "epoch 1 ended: the lease row holds epoch 2");
  l->Step();
  ASSERT_EQ(deposed_.size(), 1u);
  EXPECT_EQ(deposed_[0], "epoch 1 ended: the lease row holds epoch 2");
}

TEST_F(LeadershipTest, AFailedStartGivesTheLeaseBack) {
  auto l = Make(Unavailable("Load failed"));
  l->Step();
  EXPECT_EQ(elected_, std::vector<int64_t>{1});
  EXPECT_EQ(deposed_.size(), 1u);
  EXPECT_EQ(row_.releases, 1);
  EXPECT_EQ(l->view().epoch, 0);
}

TEST_F(LeadershipTest, StopStepsDownAndReleasesTheLease) {
  auto l = Make();
  l->Step();
  l->Stop();
  EXPECT_EQ(deposed_.size(), 1u);
  EXPECT_EQ(row_.releases, 1);
  EXPECT_LE(row_.expires_ms, clock_.MonotonicMs());  // a standby may take it now
  l->Stop();                                         // idempotent
  EXPECT_EQ(row_.releases, 1);
}

}  // namespace
}  // namespace hachi::server
