#include "server/job_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

// A job that ran on `node` with its output in `dir` (the default "hachi-%j.out").
state::JobRecord RanOn(const std::string& node, const std::string& dir) {
  state::JobRecord j;
  j.id = 42;
  j.req.user = "alice";
  j.spec.workdir = dir;
  j.spec.uid = ::getuid();
  j.state = state::JobState::kRunning;
  j.allocations.push_back({node, GpuSet(), 1, 1024, 0, 0});
  return j;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(JobLogTest, OutputPathIsTheAgentsExpansion) {
  state::JobRecord j = RanOn("node2", "/work/x");
  EXPECT_EQ(JobOutputPath(j), "/work/x/hachi-42.out");
  j.spec.stdout_path = "logs/%x-%j-%N.txt";
  j.spec.name = "train";
  EXPECT_EQ(JobOutputPath(j), "/work/x/logs/train-42-node2.txt");
  j.spec.stdout_path = "/abs/%u.log";
  EXPECT_EQ(JobOutputPath(j), "/abs/alice.log");
  j.allocations.clear();
  EXPECT_EQ(JobOutputPath(j), "") << "never ran: no file";
}

struct TailCase {
  const char* name;
  std::string text;
  int64_t bytes;
  int lines;
  std::string want;
};

TEST(JobLogTest, TailByBytesAndLines) {
  const TailCase cases[] = {
      {"all", "a\nb\nc\n", 1000, 0, "a\nb\nc\n"},
      {"last_two_lines", "a\nb\nc\n", 1000, 2, "b\nc\n"},
      {"last_line_without_newline", "a\nb\nc", 1000, 1, "c"},
      {"more_lines_than_there_are", "a\nb\n", 1000, 50, "a\nb\n"},
      {"bytes_bound_first", "0123456789\nabc\n", 6, 5, "9\nabc\n"},
      {"bytes_cut_mid_line", "0123456789", 4, 0, "6789"},
      {"empty", "", 1000, 10, ""},
  };
  for (const TailCase& c : cases) {
    SCOPED_TRACE(c.name);
    topo::TempDir dir;
    Write(dir.path() + "/hachi-42.out", c.text);
    Result<LogTail> t = ReadJobLogTail(RanOn("n1", dir.path()), {"n1"}, c.bytes, c.lines);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->text, c.want);
    EXPECT_EQ(t->size, static_cast<int64_t>(c.text.size()));
    EXPECT_EQ(t->offset + static_cast<int64_t>(t->text.size()), t->size);
    EXPECT_EQ(t->node, "n1");
  }
}

TEST(JobLogTest, RefusesWhatIsNotTheJobsLocalFile) {
  topo::TempDir dir;
  const std::string out = dir.path() + "/hachi-42.out";
  state::JobRecord j = RanOn("n1", dir.path());

  Result<LogTail> t = ReadJobLogTail(j, {"n1"}, 100, 0);
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound) << "no file yet";

  t = ReadJobLogTail(j, {"n2"}, 100, 0);
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("on node n1"), std::string::npos)
      << t.status().message();

  state::JobRecord never = j;
  never.allocations.clear();
  EXPECT_EQ(ReadJobLogTail(never, {"n1"}, 100, 0).status().code(), StatusCode::kNotFound);

  // A symlink planted where the output goes is not followed.
  Write(dir.path() + "/secret", "not yours\n");
  ASSERT_EQ(::symlink((dir.path() + "/secret").c_str(), out.c_str()), 0);
  t = ReadJobLogTail(j, {"n1"}, 100, 0);
  EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied) << t.status().ToString();
  ::unlink(out.c_str());

  // A file of another uid is not the job's output.
  Write(out, "someone else's\n");
  j.spec.uid = ::getuid() + 1;
  t = ReadJobLogTail(j, {"n1"}, 100, 0);
  EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied) << t.status().ToString();

  // Nor is a directory.
  ::unlink(out.c_str());
  ASSERT_EQ(::mkdir(out.c_str(), 0755), 0);
  j.spec.uid = ::getuid();
  t = ReadJobLogTail(j, {"n1"}, 100, 0);
  EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied) << t.status().ToString();
}

}  // namespace
}  // namespace hachi::server
