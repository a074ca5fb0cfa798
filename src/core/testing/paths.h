// Where the tests find the checkout and the build tree: testdata, examples, docs, and the
// binaries they run (`hachi`, fake libraries). The paths are compiled into one small
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

// The fakes and helpers the tests run, absolute. A test that runs one depends on its
// target (add_dependencies), so that it is built first.
const std::string& FakeNvmlLibrary();    // libnvidia-ml.so.1 (topo/testdata/fake_nvml)
const std::string& FakeCudaLibrary();    // libcuda.so.1 (diag/testdata/fake_cuda)
const std::string& FakeMpsControl();     // agent/testdata/mps/nvidia-cuda-mps-control
const std::string& TestWaiterBinary();   // the job waiter (agent/waiter_main.cc)
const std::string& TestFdThiefBinary();  // a job that tries to take its waiter's fds

}  // namespace hachi
