#include "core/testing/paths.h"

namespace hachi {

const std::string& SourceDir() {
  static const std::string dir = HACHI_SOURCE_DIR;
  return dir;
}

const std::string& BinaryDir() {
  static const std::string dir = HACHI_BINARY_DIR;
  return dir;
}

}  // namespace hachi
