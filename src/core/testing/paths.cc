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

const std::string& FakeNvmlLibrary() {
  static const std::string path = HACHI_FAKE_NVML;
  return path;
}

const std::string& FakeCudaLibrary() {
  static const std::string path = HACHI_FAKE_CUDA;
  return path;
}

const std::string& FakeMpsControl() {
  static const std::string path =
      SourceDir() + "/src/agent/testdata/mps/nvidia-cuda-mps-control";
  return path;
}

const std::string& TestWaiterBinary() {
  static const std::string path = HACHI_TEST_WAITER;
  return path;
}

const std::string& TestFdThiefBinary() {
  static const std::string path = HACHI_TEST_FD_THIEF;
  return path;
}

}  // namespace hachi
