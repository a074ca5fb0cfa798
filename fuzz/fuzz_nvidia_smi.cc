// libFuzzer target for the `nvidia-smi` readers: any bytes must give a Topology with
// findings or a clean error, never a crash, hang or sanitizer report. The checks and
// facts run on whatever was read, since they index by what the reader produced.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "topo/analysis.h"
#include "topo/nvidia_smi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace hachi::topo;
  using hachi::Result;
  Result<Topology> t = ParseTopoMatrix(text, "fuzz");
  if (t.ok()) {
    (void)Analyze(*t);
    (void)CheckTopology(*t);
    auto list = ParseGpuList(text, "fuzz");
    if (list.ok()) MergeGpuList(*t, *list, "fuzz");
  }
  auto q = ParseQueryGpuCsv(text, "fuzz");
  if (q.ok()) {
    Topology empty;
    MergeQueriedGpus(empty, *q, "fuzz");
    (void)CheckTopology(empty);
  }
  return 0;
}
