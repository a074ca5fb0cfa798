// The MIG capability devices: mig-minors and /proc/devices as the driver writes them,
// read from files under a temporary root.
#include "topo/mig_caps.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "topo/topology_testing.h"

namespace hachi::topo {
namespace {

// An A100 with GPU instances 1 and 2 (GI 2 split into two compute instances), as
// /proc/driver/nvidia-caps/mig-minors lists them (every possible instance is listed).
constexpr const char* kMigMinors =
    "config 1\n"
    "monitor 2\n"
    "gpu0/gi0/access 3\n"
    "gpu0/gi0/ci0/access 4\n"
    "gpu0/gi1/access 12\n"
    "gpu0/gi1/ci0/access 13\n"
    "gpu0/gi2/access 21\n"
    "gpu0/gi2/ci0/access 22\n"
    "gpu0/gi2/ci1/access 23\n"
    "gpu1/gi1/access 147\n"
    "gpu1/gi1/ci0/access 148\n";

constexpr const char* kProcDevices =
    "Character devices:\n"
    "  1 mem\n"
    "195 nvidia-frontend\n"
    "234 nvidia-caps-imex-channels\n"
    "235 nvidia-caps\n"
    "510 nvidia-uvm\n"
    "\n"
    "Block devices:\n"
    "  8 sd\n"
    "236 nvidia-caps\n";  // not a character device: not it

TEST(MigCapsTest, FindsTheAccessMinorsOfEachInstance) {
  Result<std::map<std::string, int>> minors = ParseMigMinors(kMigMinors, "m");
  ASSERT_TRUE(minors.ok()) << minors.status().ToString();
  MigCaps caps{235, *minors};
  struct Case {
    const char* name;
    int gpu, gi, ci;
    MigCapDevices want;
  };
  const Case cases[] = {
      {"gi1_ci0", 0, 1, 0, {235, 12, 13}},
      {"gi2_ci1", 0, 2, 1, {235, 21, 23}},
      {"second_gpu", 1, 1, 0, {235, 147, 148}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<MigCapDevices> d = caps.Find(c.gpu, c.gi, c.ci);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(*d, c.want);
  }
  EXPECT_EQ(caps.minors.at("config"), 1);
  EXPECT_EQ(caps.minors.at("monitor"), 2);
  Result<MigCapDevices> none = caps.Find(0, 3, 0);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("gpu0/gi3/access"), std::string::npos);
  EXPECT_EQ(caps.Find(0, 2, 5).status().message(),
            "mig-minors has no gpu0/gi2/ci5/access");
  EXPECT_EQ(NvidiaCapPath(13), "/dev/nvidia-caps/nvidia-cap13");
}

TEST(MigCapsTest, BadLinesNameTheLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"config 1\ngpu0/gi1/access\n", "m:2: expected '<capability> <minor>'"},
      {"config x\n", "m:1:"},
      {"gpu0/gi1/access -3\n", "m:1:"},
      {"gpu0/gi1/access 99999999\n", "m:1:"},
  };
  for (const auto& [text, want] : cases) {
    Result<std::map<std::string, int>> r = ParseMigMinors(text, "m");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(ParseMigMinors("", "m").ok());
}

TEST(MigCapsTest, MajorIsTheCharacterDeviceNamedExactly) {
  Result<int> major = ParseNvidiaCapsMajor(kProcDevices, "d");
  ASSERT_TRUE(major.ok()) << major.status().ToString();
  EXPECT_EQ(*major, 235);
  Result<int> none = ParseNvidiaCapsMajor("Character devices:\n195 nvidia\n", "d");
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("d: no nvidia-caps"), std::string::npos);
}

TEST(MigCapsTest, ReadsBothFilesUnderTheRoot) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/proc/driver/nvidia-caps");
  dir.Write("proc/driver/nvidia-caps/mig-minors", kMigMinors);
  Result<MigCaps> no_devices = ReadMigCaps(dir.path());
  EXPECT_EQ(no_devices.status().code(), StatusCode::kNotFound);
  dir.Write("proc/devices", kProcDevices);
  Result<MigCaps> caps = ReadMigCaps(dir.path());
  ASSERT_TRUE(caps.ok()) << caps.status().ToString();
  EXPECT_EQ(caps->Find(0, 1, 0).value(), (MigCapDevices{235, 12, 13}));
  std::filesystem::remove(dir.path() + "/proc/driver/nvidia-caps/mig-minors");
  EXPECT_EQ(ReadMigCaps(dir.path()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hachi::topo
