# The fake CUDA driver (docs/nvml.md, "commtest"): a shared library whose file is
# literally libcuda.so.1, alone in its own folder, simulating the node of the topology
# file the fake NVML reads ($HACHI_FAKE_NVML_TOPOLOGY). Built like fake_nvml.cmake.
if(HACHI_TESTS)
  set_target_properties(hachi_core hachi_topo PROPERTIES POSITION_INDEPENDENT_CODE ON)
  add_library(hachi_fake_cuda SHARED
    ${CMAKE_CURRENT_SOURCE_DIR}/testdata/fake_cuda/fake_cuda.cc)
  target_link_libraries(hachi_fake_cuda PRIVATE hachi_topo hachi_warnings)
  target_link_options(hachi_fake_cuda PRIVATE -Wl,--exclude-libs,ALL)
  set_target_properties(hachi_fake_cuda PROPERTIES
    OUTPUT_NAME cuda
    PREFIX lib
    SUFFIX .so.1
    CXX_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_cuda)
endif()
