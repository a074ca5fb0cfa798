// Burst nodes' powered spells: their GPU-seconds in a window, and their rows' JSON.
#include "state/power_spells.h"

#include <gtest/gtest.h>

#include <string>

namespace hachi::state {
namespace {

TEST(PowerSpells, GpuSecondsInsideTheWindow) {
  const PowerSpell s{"b1", 1000, 1600, false, "burst-a", 8, 2.0};
  EXPECT_DOUBLE_EQ(SpellGpuSeconds(s, 0, 5000), 8.0 * 600);
  EXPECT_DOUBLE_EQ(SpellGpuSeconds(s, 1200, 5000), 8.0 * 400);  // began before
  EXPECT_DOUBLE_EQ(SpellGpuSeconds(s, 0, 1100), 8.0 * 100);     // ends after
  EXPECT_DOUBLE_EQ(SpellGpuSeconds(s, 1600, 5000), 0.0);
  EXPECT_DOUBLE_EQ(SpellGpuSeconds(s, 0, 1000), 0.0);
}

TEST(PowerSpells, JsonRoundTrips) {
  const PowerSpell s{"b1", 1700000000, 1700000600, true, "burst-a", 8, 2.75};
  Result<PowerSpell> back = PowerSpellFromJson(PowerSpellToJson(s));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(PowerSpellKey(s), "b1@1700000000");
}

TEST(PowerSpells, BadRowsAreNamed) {
  struct Case {
    const char* row;
    const char* error;
  };
  const Case cases[] = {
      {"[]", "power: expected an object, got array"},
      {"{", "power: not JSON"},
      {R"({"node":"b1","gpus":"8"})", "power.gpus: expected an integer, got string"},
      {R"({"node":"b1","open":1})", "power.open: expected a boolean, got number"},
      {R"({"node":"b1","price_per_gpu_hour":"2"})",
       "power.price_per_gpu_hour: expected a number, got string"},
      {R"({"gpus":8})", "power.node: missing"},
      {R"({"node":"b1","gpus":-1})", "power.gpus: -1 < 0"},
      {R"({"node":"b1","since":10,"until":5})", "power.until: 5 is before since 10"},
      {R"({"_v":3,"_min_reader":2,"node":"b1"})",
       "power row needs a reader of version 2 or later; this hachi reads power rows up "
       "to version 1 (run a newer hachi)"},
  };
  for (const Case& c : cases) {
    Result<PowerSpell> r = PowerSpellFromJson(c.row);
    ASSERT_FALSE(r.ok()) << c.row;
    EXPECT_EQ(r.status().message(), c.error) << c.row;
  }
  // A newer row that an older reader may read: its unknown fields are ignored.
  Result<PowerSpell> newer =
      PowerSpellFromJson(R"({"_v":2,"_min_reader":1,"node":"b1","gpus":8,"zone":"x"})");
  ASSERT_TRUE(newer.ok());
  EXPECT_EQ(newer->gpus, 8);
}

}  // namespace
}  // namespace hachi::state
