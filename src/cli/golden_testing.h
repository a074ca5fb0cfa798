// Golden files of the CLI's renderers (src/cli/testdata/*.txt): a test compares what it
// rendered with the file; HACHI_UPDATE_GOLDEN=1 rewrites the file instead. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "core/strings.h"

namespace hachi::cli::testing {

inline void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(HACHI_SOURCE_DIR) + "/src/cli/testdata/" + name;
  if (const char* u = std::getenv("HACHI_UPDATE_GOLDEN"); u != nullptr && *u == '1') {
    std::ofstream(path) << actual;
    return;
  }
  std::string error;
  std::optional<std::string> want = ReadFile(path, &error);
  ASSERT_TRUE(want.has_value()) << error << " (HACHI_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(actual, *want) << "golden " << name
                           << " differs; HACHI_UPDATE_GOLDEN=1 rewrites it";
}

}  // namespace hachi::cli::testing
