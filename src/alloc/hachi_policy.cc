#include "alloc/hachi_policy.h"

#include <memory>

#include "alloc/hachi_tables.h"

namespace hachi::alloc {

Result<Choice> HachiPolicy::Choose(const NodeModel& model, GpuSet free,
                                   const Request& request) const {
  HACHI_RETURN_IF_ERROR(CheckRequest(model, free, request));
  std::shared_ptr<const HachiTables> tables = SharedHachiTables(model);
  const uint32_t chosen =
      tables->Decide(static_cast<uint32_t>(free.mask()), request.count,
                     static_cast<uint32_t>(request.required.mask()));
  Choice c;
  c.gpus = GpuSet(chosen);
  c.parts = DescribeChoice(model, free, c.gpus);
  return c;
}

}  // namespace hachi::alloc
