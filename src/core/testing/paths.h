// Where the tests find the checkout and the build tree: testdata, examples, docs, and the
// binaries they run (`hachi`, fake libraries). The two paths are compiled into one small
// object (paths.cc) rather than defined on every test's compile line: the other test
// objects' text then does not name the checkout, and ccache reuses them in a fresh clone
// elsewhere (CMakeLists.txt, hachi_test).
//
// Tests only. Thread-safe: both strings are constants.
#pragma once

#include <string>

namespace hachi {

// The checkout's root (PROJECT_SOURCE_DIR), absolute, without a trailing slash.
const std::string& SourceDir();
// The build tree's root (PROJECT_BINARY_DIR), absolute, without a trailing slash.
const std::string& BinaryDir();

}  // namespace hachi
