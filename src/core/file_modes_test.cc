#include "core/file_modes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace hachi {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

class FileModes : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-modes-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(FileModes, MadeWithItsModeParentsAsUsual) {
  ScopedUmask open(022);
  std::ostringstream warn;
  ASSERT_TRUE(EnsurePrivateDir(dir_ + "/a/b/state/", 0711, warn).ok());
  EXPECT_EQ(ModeOf(dir_ + "/a"), 0755u);
  EXPECT_EQ(ModeOf(dir_ + "/a/b"), 0755u);
  EXPECT_EQ(ModeOf(dir_ + "/a/b/state"), 0711u);
  EXPECT_EQ(warn.str(), "");  // made so, nothing narrowed
}

TEST_F(FileModes, WiderOnesAreNarrowedAndSaid) {
  const std::string state = dir_ + "/state", db = state + "/hachi.db";
  ASSERT_EQ(::mkdir(state.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(state.c_str(), 0777), 0);
  const int fd = ::open(db.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_EQ(::chmod(db.c_str(), 0644), 0);
  std::ostringstream warn;
  ASSERT_TRUE(EnsurePrivateDir(state, 0711, warn).ok());
  ASSERT_TRUE(CheckPrivateFile(db, 0600, warn).ok());
  EXPECT_EQ(ModeOf(state), 0711u);
  EXPECT_EQ(ModeOf(db), 0600u);
  EXPECT_NE(warn.str().find(state + " was mode 0777, wider than 0711: made it 0711"),
            std::string::npos)
      << warn.str();
  EXPECT_NE(warn.str().find(db + " was mode 0644, wider than 0600: made it 0600"),
            std::string::npos)
      << warn.str();
  // Narrower stays as it is.
  ASSERT_EQ(::chmod(db.c_str(), 0400), 0);
  std::ostringstream again;
  ASSERT_TRUE(CheckPrivateFile(db, 0600, again).ok());
  EXPECT_EQ(ModeOf(db), 0400u);
  EXPECT_EQ(again.str(), "");
  EXPECT_TRUE(CheckPrivateFile(state + "/absent", 0600, again).ok());
}

TEST_F(FileModes, SomeoneElsesOrNotAFileIsRefused) {
  const std::string link = dir_ + "/hachi.db", target = dir_ + "/elsewhere";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  std::ostringstream warn;
  Status st = CheckPrivateFile(link, 0600, warn);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(link + " is not a regular file (a symlink)"),
            std::string::npos);
  const std::string file = dir_ + "/file";
  const int fd = ::open(file.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  st = EnsurePrivateDir(file, 0711, warn);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another uid needs root";
  const std::string theirs = dir_ + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  st = EnsurePrivateDir(theirs, 0711, warn);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("belongs to uid 65534"), std::string::npos) << st.message();
  ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  EXPECT_EQ(CheckPrivateFile(file, 0600, warn).code(), StatusCode::kPermissionDenied);
}

TEST_F(FileModes, AKeyEveryoneCanReadIsRefused) {
  const std::string key = dir_ + "/key.pem";
  const int fd = ::open(key.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_TRUE(CheckNotWorldReadable(key, "--tls-key").ok());
  ASSERT_EQ(::chmod(key.c_str(), 0640), 0);  // a group of the admin's choosing
  EXPECT_TRUE(CheckNotWorldReadable(key, "--tls-key").ok());
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  const Status st = CheckNotWorldReadable(key, "--tls-key");
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(st.message(), "--tls-key " + key +
                              " is mode 0644: every local user can read "
                              "it; chmod o-rwx " +
                              key);
  EXPECT_TRUE(CheckNotWorldReadable("", "--tls-key").ok());
}

}  // namespace
}  // namespace hachi
