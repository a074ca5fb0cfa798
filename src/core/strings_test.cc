#include "core/strings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/cpulist.h"
#include "core/printable.h"

namespace hachi {
namespace {

TEST(StringsTest, TrimSplitLines) {
  EXPECT_EQ(Trim("  a b \t"), "a b");
  EXPECT_EQ(Split("a,,b", ',').size(), 3u);
  auto lines = SplitLines("a\r\nb\n\nc\n");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "a");
  EXPECT_EQ(lines[2], "");
  EXPECT_EQ(ParseInt("42"), 42);
  EXPECT_FALSE(ParseInt("4x").has_value());
  EXPECT_FALSE(ParseInt("").has_value());
}

TEST(StringsTest, BaseName) {
  EXPECT_EQ(BaseName("/usr/bin/psql"), "psql");
  EXPECT_EQ(BaseName("psql"), "psql");
  EXPECT_EQ(BaseName("dir/"), "");
  EXPECT_EQ(BaseName(""), "");
}

TEST(StringsTest, StripAnsiEscapes) {
  EXPECT_EQ(StripAnsiEscapes("\t\x1b[4mGPU0\tCPU Affinity\x1b[0m"),
            "\tGPU0\tCPU Affinity");
  EXPECT_EQ(StripAnsiEscapes("a\x1b[1;32mb\x1b[0mc"), "abc");
  EXPECT_EQ(StripAnsiEscapes("a\x1b"
                             "Bc"),
            "ac");  // two-byte escape
  EXPECT_EQ(StripAnsiEscapes("plain\ttext\n"), "plain\ttext\n");
  EXPECT_EQ(StripAnsiEscapes("end\x1b["), "end");  // cut short: dropped, no overrun
  EXPECT_EQ(StripAnsiEscapes("end\x1b"), "end");
}

TEST(StringsTest, PrintableText) {
  struct Row {
    const char* name;
    std::string in, want;
  } rows[] = {
      {"plain", "train-llama", "train-llama"},
      {"utf8 and backslash", "\xe5\x85\xab a\\b", "\xe5\x85\xab a\\b"},
      {"escape", "x\x1b]0;pwned\x07y", "x\\x1b]0;pwned\\x07y"},
      {"newline and cr", "a\nb\rc", "a\\x0ab\\x0dc"},
      {"del", "a\x7f", "a\\x7f"},
      {"c1 csi",
       "a\xc2\x9b"
       "2J",
       "a\\xc2\\x9b2J"},
      {"latin1 kept", "caf\xc3\xa9", "caf\xc3\xa9"},
  };
  for (const Row& r : rows) EXPECT_EQ(PrintableText(r.in), r.want) << r.name;
}

TEST(CpuListTest, ParsesAndFormats) {
  auto r = ParseCpuList("0-3,8,6,14,22,30");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(FormatCpuList(*r), "0-3,6,8,14,22,30");
  EXPECT_EQ(ParseCpuList("0-55,112-167")->size(), 112u);
  EXPECT_FALSE(ParseCpuList("PH0-115").ok());
  EXPECT_FALSE(ParseCpuList("5-3").ok());
  EXPECT_FALSE(ParseCpuList("").ok());
  EXPECT_FALSE(ParseCpuList("N/A").ok());
}

}  // namespace
}  // namespace hachi

namespace hachi {
namespace {

// sbatch's standard input: read to the end, within a bound.
TEST(ReadFd, ReadsToTheEndWithinTheBound) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "0123456789", 10), 10);
  ::close(fds[1]);
  std::string why;
  std::optional<std::string> all = ReadFd(fds[0], 10, &why);
  ::close(fds[0]);
  ASSERT_TRUE(all.has_value()) << why;
  EXPECT_EQ(*all, "0123456789");

  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "0123456789", 10), 10);
  ::close(fds[1]);
  EXPECT_FALSE(ReadFd(fds[0], 9, &why).has_value());
  ::close(fds[0]);
  EXPECT_EQ(why, "more than 9 bytes");
}

}  // namespace
}  // namespace hachi
