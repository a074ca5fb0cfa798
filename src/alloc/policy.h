// Policy: how the GPUs of one node are chosen for a request. A policy is a small
// stateless class behind this interface, found by name in a static registry
// (STYLE.md: Nomad scheduler.go, Kubernetes default_registry.go):
//
//   "hachi"       the default: exact, topology-aware, leftover-aware (objective.h,
//                 docs/allocator.md)
//   "besteffort"  a port of NVIDIA go-gpuallocator's besteffort policy, the reference
//                 we compare against (besteffort_policy.h)
//
// Policies are immutable and thread-safe; the registry's policies live for the
// whole program.
#pragma once

#include <string_view>
#include <vector>

#include "alloc/choice.h"
#include "alloc/node_model.h"
#include "core/status.h"

namespace hachi::alloc {

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  // Chooses request.count GPUs from `free` on `model`, including request.required.
  // Errors (CheckRequest): kUnsatisfiable when the count can never fit the node,
  // kInvalidArgument for a bad `required` or `free`, kBusy when too few are free.
  virtual Result<Choice> Choose(const NodeModel& model, GpuSet free,
                                const Request& request) const = 0;
};

// The registered policy called `name`, or nullptr.
const Policy* FindPolicy(std::string_view name);
// All registered names, the default ("hachi") first.
std::vector<std::string_view> PolicyNames();
// The default policy ("hachi").
const Policy& DefaultPolicy();

// The checks every policy runs first, in this order:
//   count < 1 or > node size           kUnsatisfiable "job asks for 9 GPUs; node has 8"
//   free or required outside the node  kInvalidArgument, naming the GPUs
//   required not free, or > count      kInvalidArgument, naming the GPUs
//   fewer free than count              kBusy "needs 4 GPUs, 3 free: 1,5,6"
Status CheckRequest(const NodeModel& model, GpuSet free, const Request& request);

}  // namespace hachi::alloc
