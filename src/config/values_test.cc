// Table tests of the config's value syntaxes: durations, times of day, weekdays and
// Slurm-style node lists.
#include "config/values.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hachi::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseDurationTest, Table) {
  struct Case {
    const char* name;
    const char* text;
    Duration want;  // -1: an error
  };
  const Case cases[] = {
      {"seconds", "90s", 90},     {"minutes", "30m", 30 * kMinute},
      {"hours", "4h", 4 * kHour}, {"days", "7d", 7 * kDay},
      {"weeks", "2w", 14 * kDay}, {"combined", "1h30m", 90 * kMinute},
      {"zero", "0s", 0},          {"spaces trimmed", " 4h ", 4 * kHour},
      {"bad unit", "9x", -1},     {"no unit", "30", -1},
      {"no number", "h", -1},     {"empty", "", -1},
      {"negative", "-4h", -1},    {"fraction", "1.5h", -1},
      {"too long", "3651d", -1},  {"inner space", "1h 30m", -1},
  };
  for (const Case& c : cases) {
    Result<Duration> d = ParseDuration(c.text);
    if (c.want < 0) {
      ASSERT_FALSE(d.ok()) << c.name;
      if (std::string(c.name) != "too long") {
        EXPECT_THAT(d.status().message(),
                    HasSubstr("is not a duration (use 30m, 4h, 7d)"))
            << c.name;
      }
    } else {
      ASSERT_TRUE(d.ok()) << c.name << ": " << d.status().message();
      EXPECT_EQ(*d, c.want) << c.name;
    }
  }
}

TEST(ParseTimeOfDayTest, Table) {
  struct Case {
    const char* name;
    const char* text;
    bool allow_24;
    int want;  // -1: an error
  };
  const Case cases[] = {
      {"morning", "08:00", false, 8 * 60},
      {"evening", "20:30", false, 20 * 60 + 30},
      {"midnight", "00:00", false, 0},
      {"last minute", "23:59", false, 23 * 60 + 59},
      {"24:00 as an end", "24:00", true, 1440},
      {"24:00 as a start", "24:00", false, -1},
      {"24:01", "24:01", true, -1},
      {"25:00", "25:00", true, -1},
      {"minute 60", "08:60", false, -1},
      {"one-digit hour", "8:00", false, -1},
      {"no colon", "0800", false, -1},
      {"am/pm", "08:00am", false, -1},
  };
  for (const Case& c : cases) {
    Result<int> m = ParseTimeOfDay(c.text, c.allow_24);
    if (c.want < 0) {
      ASSERT_FALSE(m.ok()) << c.name;
      EXPECT_THAT(m.status().message(), HasSubstr("is not a time of day")) << c.name;
    } else {
      ASSERT_TRUE(m.ok()) << c.name << ": " << m.status().message();
      EXPECT_EQ(*m, c.want) << c.name;
    }
  }
}

TEST(ParseWeekdayTest, Table) {
  struct Case {
    const char* name;
    const char* text;
    int want;  // -1: an error
  };
  const Case cases[] = {
      {"sunday short", "sun", 0}, {"monday short", "mon", 1},
      {"saturday", "sat", 6},     {"full name", "Wednesday", 3},
      {"upper case", "FRI", 5},   {"two letters", "mo", -1},
      {"not a day", "xyz", -1},   {"empty", "", -1},
  };
  for (const Case& c : cases) {
    Result<int> d = ParseWeekday(c.text);
    if (c.want < 0) {
      EXPECT_FALSE(d.ok()) << c.name;
    } else {
      ASSERT_TRUE(d.ok()) << c.name << ": " << d.status().message();
      EXPECT_EQ(*d, c.want) << c.name;
    }
  }
}

TEST(ExpandHostListTest, Table) {
  struct Case {
    const char* name;
    const char* text;
    std::vector<std::string> want;  // empty: an error
  };
  const Case cases[] = {
      {"one name", "n0001", {"n0001"}},
      {"padded range", "n[0001-0003]", {"n0001", "n0002", "n0003"}},
      {"width grows past the pad", "n[098-101]", {"n098", "n099", "n100", "n101"}},
      {"unpadded range", "gpu[8-10]", {"gpu8", "gpu9", "gpu10"}},
      {"list in brackets", "n[1-2,7]", {"n1", "n2", "n7"}},
      {"suffix", "rack[1-2]-a", {"rack1-a", "rack2-a"}},
      {"several items", "n[01-02],gpu9", {"n01", "n02", "gpu9"}},
      {"single number", "n[5]", {"n5"}},
      {"backwards range", "n[3-1]", {}},
      {"letters in range", "n[a-c]", {}},
      {"unclosed bracket", "n[1-3", {}},
      {"two groups", "r[1-2]n[1-2]", {}},
      {"empty item", "n1,,n2", {}},
      {"empty bracket", "n[]", {}},
      {"space in name", "n 1", {}},
      {"too many", "n[0-100000]", {}},
  };
  for (const Case& c : cases) {
    Result<std::vector<std::string>> got = ExpandHostList(c.text);
    if (c.want.empty()) {
      ASSERT_FALSE(got.ok()) << c.name;
      EXPECT_THAT(got.status().message(), HasSubstr("is not a node list")) << c.name;
    } else {
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().message();
      EXPECT_EQ(*got, c.want) << c.name;
    }
  }
}

TEST(ExpandHostListTest, LargeRangeKeepsOrder) {
  Result<std::vector<std::string>> got = ExpandHostList("n[0001-0096]");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 96u);
  EXPECT_EQ(got->front(), "n0001");
  EXPECT_EQ(got->back(), "n0096");
  EXPECT_THAT(*ExpandHostList("b[1-2]"), ElementsAre("b1", "b2"));
}

// fuzz_config: non-ASCII text where toml++ 3.3 checks for whitespace reached undefined
// behaviour (fuzz/corpus/fuzz_config/crash-tomlpp-unreachable-*.toml). Strings and
// comments keep any character.
TEST(CheckTomlTextTest, Table) {
  struct Case {
    const char* name;
    std::string text;
    std::string error;  // "" = fine
  };
  const Case cases[] = {
      {"Ascii", "a = 1\n[p]\nb = \"x\"\n", ""},
      {"InBasicString", "a = \"\xc3\xa9quipe\"\n", ""},
      {"InLiteralString", "a = '\xc3\xa9'\n", ""},
      {"InQuotedKey", "\"\xc3\xa9\" = 1\n", ""},
      {"InComment", "# \xc3\xa9quipe de nuit\na = 1\n", ""},
      {"InMultiLine", "a = \"\"\"\n\xc3\xa9\n\"\"\"\nb = '''\\\n\xc3\xa9'''\n", ""},
      {"EscapedQuote", "a = \"\\\"\xc3\xa9\"\n", ""},
      {"ByteOrderMark",
       "\xef\xbb\xbf"
       "a = 1\n",
       ""},
      {"BareAfterValue", "a = 1\xc3\xa9\n",
       "1: a non-ASCII character outside a string or comment"},
      {"StartOfLine", "[p]\n\xc3\xa9 = 1\n",
       "2: a non-ASCII character outside a string or comment"},
      {"LoneBytes", "\xcc\xaa", "1: a non-ASCII character outside"},
      {"LineEndingBackslash", "a = \"\"\"\\\n  \xc2\xa7\"\"\"\n",
       "2: a non-ASCII character after a backslash in a multi-line string"},
      // toml++ 3.3 assumes a table header has a name (upstream #301).
      {"HeaderWithoutName", " [\n", "1: a table header without a name"},
      {"ArrayHeaderWithoutName", "[[ =", "1: a table header without a name"},
      {"TripleBracket", "[[[1]]]\n", "1: a table header without a name"},
      {"ArrayOfArraysAcrossLines", "a = [\n[\n1], [2]]\n[t]\n[[u]]\n['v']\n", ""},
      {"EscapeAfterLineEndingBackslash", "a = \"\"\"x\\\n\\\xef\xbb\xaf\"\"\"\n",
       "2: a non-ASCII character after a backslash in a multi-line string"},
      {"AfterStringEnds", "a = \"x\" \xc3\xa9\n", "1: a non-ASCII character outside"},
      // A quote inside a bad value opens no string
      // (crash-tomlpp-unreachable-quote-in-value).
      {"QuoteInsideAValue", "a =-d\"shared\xc5\x98\n",
       "1: a non-ASCII character outside"},
      {"InlineTableAndArray",
       "a = { b = \"\xc3\xa9\", c = [\"\xc3\xa9\",\n'\xc3\xa9'] }\n", ""},
      {"DottedQuotedKey", "a.\"\xc3\xa9\" = 1\n", ""},
      {"NoBlanksAroundEquals", "a=\"\xc3\xa9\"\nb={c='\xc3\xa9'}\n", ""},
      {"EqualsInsideAValue", "a =-[node.a=\"'''''$-{r\xc5\x98\n",
       "1: a non-ASCII character"},
      {"QuotedTableHeader", "[node.\"n[0001-0002]\"]\nblock = \"b\xc3\xa9\"\n", ""},
      {"BracketInsideAValue", "a =-[node.\"'''''$ed\xc5\x98[[]](\n",
       "1: a non-ASCII character"},
  };
  for (const Case& c : cases) {
    const Status s = CheckTomlText(c.text);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s.message();
    } else {
      EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.name;
    }
  }
}

}  // namespace
}  // namespace hachi::config
