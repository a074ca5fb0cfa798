# The fake NVML (docs/nvml.md): a shared library whose file is literally
# libnvidia-ml.so.1, alone in its own folder, answering for a Hachi topology file.
# It links hachi_topo to read that file, so hachi_topo and hachi_core are built as
# position-independent code (harmless for the static binaries).
if(HACHI_TESTS)
  set_target_properties(hachi_core hachi_topo PROPERTIES POSITION_INDEPENDENT_CODE ON)
  add_library(hachi_fake_nvml SHARED
    ${CMAKE_CURRENT_SOURCE_DIR}/testdata/fake_nvml/fake_nvml.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/testdata/fake_nvml/fake_nvml_mig.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/testdata/fake_nvml/fake_nvml_activity.cc)
  target_link_libraries(hachi_fake_nvml PRIVATE hachi_topo hachi_warnings)
  # Only the NVML symbols are exported; the static libraries inside stay private.
  target_link_options(hachi_fake_nvml PRIVATE -Wl,--exclude-libs,ALL)
  set_target_properties(hachi_fake_nvml PROPERTIES
    OUTPUT_NAME nvidia-ml
    PREFIX lib
    SUFFIX .so.1
    CXX_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_nvml)
endif()
