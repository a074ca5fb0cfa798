// Golden files of the CLI's renderers (src/cli/testdata/*.txt, and folders of them such
// as testdata/doctor/): a test compares what it rendered with the file;
// HACHI_UPDATE_GOLDEN=1 rewrites the file (and makes its folder) instead. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "core/strings.h"
#include "core/testing/paths.h"

namespace hachi::cli::testing {

inline void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = SourceDir() + "/src/cli/testdata/" + name;
  if (const char* u = std::getenv("HACHI_UPDATE_GOLDEN"); u != nullptr && *u == '1') {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << actual;
    return;
  }
  std::string error;
  std::optional<std::string> want = hachi::ReadFile(path, &error);
  ASSERT_TRUE(want.has_value()) << error << " (HACHI_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(actual, *want) << "golden " << name
                           << " differs; HACHI_UPDATE_GOLDEN=1 rewrites it";
}

}  // namespace hachi::cli::testing
