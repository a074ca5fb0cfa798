#include "server/job_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
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
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound) << t.status().ToString();
  ::unlink(out.c_str());

  // A file of another uid is not the job's output.
  Write(out, "someone else's\n");
  j.spec.uid = ::getuid() + 1;
  t = ReadJobLogTail(j, {"n1"}, 100, 0);
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound) << t.status().ToString();

  // Nor is a directory.
  ::unlink(out.c_str());
  ASSERT_EQ(::mkdir(out.c_str(), 0755), 0);
  j.spec.uid = ::getuid();
  t = ReadJobLogTail(j, {"n1"}, 100, 0);
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound) << t.status().ToString();
}

// Whatever keeps the server from reading the log, the answer is the same
// (code and text), so GET /jobs/N/log tells nobody whether a path exists in a directory
// they cannot list, nor whose a file there is. Before, a symlink and another uid's file
// were 403s with their own texts ("... belongs to uid 0 ..."), a missing file a 404, and
// a directory the job's user cannot search was no obstacle to a root server.
TEST(JobLogTest, EveryRefusalGivesTheSameAnswer) {
  const bool root = ::geteuid() == 0;
  // As root the job is nobody's, so the job's own permissions can be tested; as a user
  // the job is the user's (the server opens as itself then).
  const uid_t uid = root ? 65534 : ::getuid();
  const gid_t gid = root ? 65534 : ::getgid();
  topo::TempDir top;
  ASSERT_EQ(::chmod(top.path().c_str(), 0755), 0);
  struct Case {
    const char* name;
    std::function<std::string(const std::string& dir)> plant;  // returns the job's dir
    bool root_only;
  };
  auto job_file = [&](const std::string& path) {
    Write(path, "the job's\n");
    return ::chown(path.c_str(), uid, gid) == 0;
  };
  const Case cases[] = {
      {"missing", [](const std::string& d) { return d; }, false},
      {"symlink_to_a_file_of_the_job",
       [&](const std::string& d) {
         EXPECT_TRUE(job_file(d + "/real"));
         EXPECT_EQ(::symlink((d + "/real").c_str(), (d + "/hachi-42.out").c_str()), 0);
         return d;
       },
       false},
      {"symlink_to_nothing",
       [](const std::string& d) {
         EXPECT_EQ(::symlink("/nonexistent", (d + "/hachi-42.out").c_str()), 0);
         return d;
       },
       false},
      {"another_uids_file",
       [](const std::string& d) {
         Write(d + "/hachi-42.out", "not the job's\n");
         EXPECT_EQ(::chown((d + "/hachi-42.out").c_str(), 0, 0), 0);
         return d;
       },
       true},
      {"a_directory",
       [](const std::string& d) {
         EXPECT_EQ(::mkdir((d + "/hachi-42.out").c_str(), 0755), 0);
         return d;
       },
       false},
      {"a_fifo",
       [](const std::string& d) {
         EXPECT_EQ(::mkfifo((d + "/hachi-42.out").c_str(), 0666), 0);
         return d;
       },
       false},
      // The job's own file, in a directory the job's user may not search (root's 0700):
      // only root could read it, and the server reads as the job's user.
      {"dir_the_job_cannot_search",
       [&](const std::string& d) {
         const std::string locked = d + "/locked";
         EXPECT_EQ(::mkdir(locked.c_str(), 0700), 0);
         EXPECT_TRUE(job_file(locked + "/hachi-42.out"));
         return locked;
       },
       true},
  };
  std::string first_message;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    if (c.root_only && !root) continue;
    const std::string d = top.path() + "/" + c.name;
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
    state::JobRecord j = RanOn("n1", c.plant(d));
    j.spec.uid = uid;
    j.spec.gid = gid;
    Result<LogTail> t = ReadJobLogTail(j, {"n1"}, 100, 0);
    ASSERT_FALSE(t.ok()) << "read " << t->text;
    EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(t.status().message(), "job 42 has no log readable here");
  }
  // And the job's own file in a directory it may search is read, as that user.
  const std::string d = top.path() + "/fine";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  ASSERT_TRUE(job_file(d + "/hachi-42.out"));
  ASSERT_EQ(::chmod((d + "/hachi-42.out").c_str(), 0600), 0);
  state::JobRecord j = RanOn("n1", d);
  j.spec.uid = uid;
  j.spec.gid = gid;
  Result<LogTail> t = ReadJobLogTail(j, {"n1"}, 100, 0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->text, "the job's\n");
  // The server's own identity is back: it can still make root-only things.
  EXPECT_EQ(static_cast<uid_t>(::geteuid()), root ? 0u : ::getuid());
  const std::string mine = top.path() + "/after";
  ASSERT_EQ(::mkdir(mine.c_str(), 0700), 0);
  struct stat st {};
  ASSERT_EQ(::stat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid()) << "the fsuid was not restored";
}

}  // namespace
}  // namespace hachi::server
