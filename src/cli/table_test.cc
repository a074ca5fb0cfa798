#include "cli/table.h"

#include <gtest/gtest.h>

namespace hachi::cli {
namespace {

TEST(Table, FitField) {
  struct Case {
    std::string name, value;
    int width;
    Align align;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"right_pad", "3136", 8, Align::kRight, "    3136"},
      {"left_pad", "pair", 6, Align::kLeft, "pair  "},
      {"truncate_keeps_head", "whole-node", 8, Align::kRight, "whole-no"},
      {"exact", "gpu8", 4, Align::kLeft, "gpu8"},
      {"no_width", "anything at all", 0, Align::kRight, "anything at all"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(FitField(c.value, c.width, c.align), c.want);
  }
}

TEST(Table, FormatString) {
  Result<std::vector<FormatItem>> items = ParseFormatString("%.8i|%-5j %%%R", "ijR");
  ASSERT_TRUE(items.ok());
  std::string line = RenderFormatLine(*items, [](char c) {
    return c == 'i' ? std::string("42") : c == 'j' ? std::string("a-long-name") : "gpu01";
  });
  EXPECT_EQ(line, "      42|a-lon %gpu01");

  struct Err {
    std::string name, format, want;
  };
  const std::vector<Err> errs = {
      {"unknown", "%i %q", "format '%i %q': unknown field %q (known: ijR)"},
      {"dangling", "%i %.10", "format '%i %.10': '%.10' has no field code"},
  };
  for (const Err& e : errs) {
    SCOPED_TRACE(e.name);
    Result<std::vector<FormatItem>> r = ParseFormatString(e.format, "ijR");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), e.want);
  }
}

TEST(Table, FitToContent) {
  Table t({{"NAME"}, {"GPUS", Align::kRight}, {"NOTE", Align::kLeft, 5}});
  t.AddRow({"a", "8", "truncated"});
  t.AddRow({"longer-name", "16"});
  EXPECT_EQ(t.Render(),
            "NAME         GPUS  NOTE\n"
            "a               8  trunc\n"
            "longer-name    16\n");
}

}  // namespace
}  // namespace hachi::cli
