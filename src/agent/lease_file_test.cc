// The node's lease file (lease_file.h): what the agent writes and a waiter reads back,
// on a FakeClock; a damaged file reads as no lease. The waiters that enforce it are in
// launcher_lease_test.cc.
#include "agent/lease_file.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace hachi::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class LeaseFileTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-lease-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/" + kLeaseFileName;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::unique_ptr<LeaseFile> Open() {
    Result<std::unique_ptr<LeaseFile>> f = LeaseFile::Open(path_, &clock_);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(*f) : nullptr;
  }
  int64_t NowMs() const { return clock_.MonotonicMs(); }

  FakeClock clock_;
  std::string dir_, path_;
};

TEST_F(LeaseFileTest, NoLeaseUntilTheFirstHoldThenItsDeadline) {
  std::unique_ptr<LeaseFile> f = Open();
  ASSERT_NE(f, nullptr);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_size, 40);
  EXPECT_EQ(LeaseDeadlineMs(f->fd()), std::nullopt) << "a new file holds no lease";
  EXPECT_EQ(f->deadline_ms(), 0);

  const int64_t t0 = NowMs();
  ASSERT_TRUE(f->HoldFor(30'000).ok());
  EXPECT_EQ(LeaseDeadlineMs(f->fd()), t0 + 30'000);
  std::optional<LeaseView> v = ReadLease(f->fd());
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->held_at_ms, t0);
  EXPECT_EQ(f->deadline_ms(), t0 + 30'000);
  // The descriptor waiters get reads, and only reads.
  EXPECT_EQ(write(f->fd(), "x", 1), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_TRUE(fcntl(f->fd(), F_GETFD) & FD_CLOEXEC);
}

TEST_F(LeaseFileTest, EachHoldMovesTheDeadlineForwardNeverBack) {
  std::unique_ptr<LeaseFile> f = Open();
  ASSERT_NE(f, nullptr);
  const int64_t t0 = NowMs();
  ASSERT_TRUE(f->HoldFor(30'000).ok());
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(f->HoldFor(30'000).ok());
  EXPECT_EQ(LeaseDeadlineMs(f->fd()), t0 + 35'000);
  EXPECT_EQ(ReadLease(f->fd())->held_at_ms, t0 + 5'000);
  // Shorter than what waiters may be asleep on: the deadline stays, the hold is noted.
  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(f->HoldFor(1'000).ok());
  EXPECT_EQ(LeaseDeadlineMs(f->fd()), t0 + 35'000);
  EXPECT_EQ(ReadLease(f->fd())->held_at_ms, t0 + 6'000);
  ASSERT_TRUE(f->HoldFor(-5).ok());
  EXPECT_EQ(LeaseDeadlineMs(f->fd()), t0 + 35'000);
}

// A restarted agent keeps its predecessor's deadline (the runs it adopts stay under it).
TEST_F(LeaseFileTest, ReopenedKeepsTheDeadlineOfThisBoot) {
  const int64_t t0 = NowMs();
  ASSERT_TRUE(Open()->HoldFor(30'000).ok());
  std::unique_ptr<LeaseFile> again = Open();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->deadline_ms(), t0 + 30'000);
  EXPECT_EQ(LeaseDeadlineMs(again->fd()), t0 + 30'000);
  ASSERT_TRUE(again->HoldFor(1'000).ok());
  EXPECT_EQ(LeaseDeadlineMs(again->fd()), t0 + 30'000);
}

struct DamageCase {
  std::string name;
  // What happens to the file of a held lease: truncated to `size`, or the byte at
  // `flip` changed.
  off_t size;
  int flip;
};

class LeaseFileDamage : public LeaseFileTest,
                        public testing::WithParamInterface<DamageCase> {};

// A file a reader cannot trust is no lease: the waiter never stops a job on it.
TEST_P(LeaseFileDamage, ReadsAsNoLease) {
  const DamageCase& c = GetParam();
  std::unique_ptr<LeaseFile> f = Open();
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->HoldFor(30'000).ok());
  ASSERT_TRUE(LeaseDeadlineMs(f->fd()).has_value());
  const int fd = open(path_.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  if (c.flip >= 0) {
    unsigned char b = 0;
    ASSERT_EQ(pread(fd, &b, 1, c.flip), 1);
    b ^= 0x10;
    ASSERT_EQ(pwrite(fd, &b, 1, c.flip), 1);
  } else {
    ASSERT_EQ(ftruncate(fd, c.size), 0);
  }
  close(fd);
  EXPECT_EQ(LeaseDeadlineMs(f->fd()), std::nullopt);
  // And a new agent starts from no lease on it.
  f.reset();
  std::unique_ptr<LeaseFile> again = Open();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->deadline_ms(), 0);
  EXPECT_EQ(LeaseDeadlineMs(again->fd()), std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, LeaseFileDamage,
    testing::Values(DamageCase{"empty", 0, -1}, DamageCase{"short", 39, -1},
                    DamageCase{"magic", 40, 0}, DamageCase{"deadline", 40, 9},
                    DamageCase{"held_at", 40, 17}, DamageCase{"boot", 40, 25},
                    DamageCase{"checksum", 40, 39}),
    [](const testing::TestParamInfo<DamageCase>& row) { return row.param.name; });

TEST_F(LeaseFileTest, RefusesWhatIsNotARegularFile) {
  ASSERT_EQ(mkdir(path_.c_str(), 0700), 0);
  EXPECT_FALSE(LeaseFile::Open(path_, &clock_).ok());
  ASSERT_EQ(rmdir(path_.c_str()), 0);
  ASSERT_EQ(symlink("/etc/passwd", path_.c_str()), 0);
  EXPECT_FALSE(LeaseFile::Open(path_, &clock_).ok()) << "never follows a link";
}

TEST_F(LeaseFileTest, AFileOfAnotherModeIsMade0600) {
  std::ofstream(path_) << "";
  ASSERT_EQ(chmod(path_.c_str(), 0644), 0);
  ASSERT_NE(Open(), nullptr);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// Reads racing writes: every deadline read is one that was written (a torn record is
// read again), and they only go forward.
TEST_F(LeaseFileTest, ReadersRacingHoldsSeeWholeRecords) {
  std::unique_ptr<LeaseFile> f = Open();
  ASSERT_NE(f, nullptr);
  const int64_t t0 = NowMs();
  ASSERT_TRUE(f->HoldFor(1'000'000).ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 1; i <= 20'000; ++i) {
      clock_.Advance(std::chrono::milliseconds(1));
      if (!f->HoldFor(1'000'000).ok()) break;
    }
    done = true;
  });
  int64_t last = 0;
  int reads = 0, bad = 0;
  while (!done || reads == 0) {
    std::optional<LeaseView> v = ReadLease(f->fd());
    ++reads;
    if (!v || v->deadline_ms < last || v->deadline_ms != v->held_at_ms + 1'000'000 ||
        v->held_at_ms < t0) {
      ++bad;
    } else {
      last = v->deadline_ms;
    }
  }
  writer.join();
  EXPECT_EQ(bad, 0) << "of " << reads << " reads";
  EXPECT_EQ(LeaseDeadlineMs(f->fd()), t0 + 20'000 + 1'000'000);
}

}  // namespace
}  // namespace hachi::agent
