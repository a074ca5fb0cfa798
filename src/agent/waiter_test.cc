// The job waiter's exit file and command line (the waiter's runs are in
// launcher_test.cc).
#include "agent/waiter.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace hachi::agent {
namespace {

struct FileCase {
  std::string name;
  std::string text;
  bool ok;
  bool signaled;
  int code;
  int64_t lease_silent_ms = -1;  // stopped by its waiter on the lease
};

class WaitedStatusFile : public testing::TestWithParam<FileCase> {};

TEST_P(WaitedStatusFile, Reads) {
  const FileCase& c = GetParam();
  char tmpl[] = "/tmp/hachi-waiter-test-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(tmpl) << c.text;
  std::optional<WaitedStatus> w = ReadWaitedStatus(tmpl);
  unlink(tmpl);
  ASSERT_EQ(w.has_value(), c.ok);
  if (!c.ok) return;
  EXPECT_EQ(w->signaled, c.signaled);
  EXPECT_EQ(w->code, c.code);
  EXPECT_EQ(w->lease_silent_ms, c.lease_silent_ms);
  EXPECT_EQ(FormatWaitedStatus(*w), c.text);  // what the waiter writes, read back
}

INSTANTIATE_TEST_SUITE_P(
    Rows, WaitedStatusFile,
    testing::Values(
        FileCase{"exit0", "exit 0\n", true, false, 0},
        FileCase{"exit255", "exit 255\n", true, false, 255},
        FileCase{"signal9", "signal 9\n", true, true, 9},
        FileCase{"lease_term", "signal 15\nlease 41200\n", true, true, 15, 41200},
        FileCase{"lease_exit", "exit 0\nlease 30000\n", true, false, 0, 30000},
        FileCase{"empty", "", false, false, 0},
        FileCase{"garbled", "exi", false, false, 0},
        FileCase{"unknown_word", "stopped 3\n", false, false, 0}),
    [](const testing::TestParamInfo<FileCase>& row) { return row.param.name; });

TEST(WaitedStatusFile, MissingFileIsNoStatus) {
  EXPECT_FALSE(ReadWaitedStatus("/nonexistent/hachi/exit-1").has_value());
}

// Started by hand (not by the agent) it refuses and says why, running nothing.
TEST(WaiterMain, RefusesAMalformedCommandLine) {
  std::vector<std::vector<std::string>> rows = {
      {"hachi", kWaiterCommand},
      {"hachi", kWaiterCommand, "x", "4", "1", "/bin/true", "--", "true"},
      {"hachi", kWaiterCommand, "3", "4", "2", "/bin/true", "--", "true"},
      {"hachi", kWaiterCommand, "3", "4", "1", "/bin/true", "true"},
      // --lease=FD:GRACE, before the rest
      {"hachi", kWaiterCommand, "--lease=5", "3", "4", "1", "/bin/true", "--", "true"},
      {"hachi", kWaiterCommand, "--lease=5:x", "3", "4", "1", "/bin/true", "--", "true"},
      {"hachi", kWaiterCommand, "--lease=-1:3", "3", "4", "1", "/bin/true", "--", "true"},
      {"hachi", kWaiterCommand, "--lease=5:3", "3", "4", "1", "/bin/true", "true"},
      {"hachi", kWaiterCommand, "--lease=5:3"},
  };
  for (std::vector<std::string>& row : rows) {
    std::vector<char*> argv;
    for (std::string& a : row) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(WaiterMain(static_cast<int>(row.size()), argv.data()), 2) << row.size();
  }
}

}  // namespace
}  // namespace hachi::agent

namespace hachi::agent {
namespace {

// Where the agent finds the waiter's own program: beside its binary (build tree), in
// ../lib/hachi (package), else its own binary.
TEST(FindWaiterBinary, BesideThenLibHachiThenFallback) {
  char tmpl[] = "/tmp/hachi-waiter-find-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  const std::string bin = root + "/bin", lib = root + "/lib/hachi";
  ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/lib").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(lib.c_str(), 0755), 0);
  auto make = [](const std::string& path, mode_t mode) {
    std::ofstream(path) << "#!/bin/sh\n";
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  };
  const std::string self = bin + "/hachi";
  EXPECT_EQ(FindWaiterBinary(self, "/proc/self/exe"), "/proc/self/exe");
  EXPECT_EQ(FindWaiterBinary("hachi", "/proc/self/exe"), "/proc/self/exe");
  make(lib + "/hachi-job-waiter", 0644);  // not executable: not taken
  EXPECT_EQ(FindWaiterBinary(self, "/proc/self/exe"), "/proc/self/exe");
  make(lib + "/hachi-job-waiter", 0755);
  EXPECT_EQ(FindWaiterBinary(self, "/proc/self/exe"),
            bin + "/../lib/hachi/hachi-job-waiter");
  make(bin + "/hachi-job-waiter", 0755);
  EXPECT_EQ(FindWaiterBinary(self, "/proc/self/exe"), bin + "/hachi-job-waiter");
  for (const std::string& f : {bin + "/hachi-job-waiter", lib + "/hachi-job-waiter"}) {
    unlink(f.c_str());
  }
  for (const std::string& d : {lib, root + "/lib", bin, root}) rmdir(d.c_str());
}

}  // namespace
}  // namespace hachi::agent
