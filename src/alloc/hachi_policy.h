// HachiPolicy ("hachi"): the exact, topology-aware default policy. It maximises the
// objective in objective.h over every candidate set, using the node layout's shared
// precomputed tables (hachi_tables.h; built once per layout, tens of ms at 16 GPUs).
// For repeated decisions use AllocCache (cache.h). Stateless; thread-safe.
#pragma once

#include "alloc/policy.h"

namespace hachi::alloc {

class HachiPolicy final : public Policy {
 public:
  std::string_view name() const override { return "hachi"; }
  Result<Choice> Choose(const NodeModel& model, GpuSet free,
                        const Request& request) const override;
};

}  // namespace hachi::alloc
