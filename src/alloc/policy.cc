#include "alloc/policy.h"

#include <string>

#include "alloc/besteffort_policy.h"
#include "alloc/hachi_policy.h"

namespace hachi::alloc {
namespace {

std::string Gpus(int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

// The registry: constructed on first use, never destroyed (policies are stateless).
const std::vector<const Policy*>& Registry() {
  static const auto* registry = new std::vector<const Policy*>{
      new HachiPolicy(),
      new BestEffortPolicy(),
  };
  return *registry;
}

}  // namespace

const Policy* FindPolicy(std::string_view name) {
  for (const Policy* p : Registry()) {
    if (p->name() == name) return p;
  }
  return nullptr;
}

std::vector<std::string_view> PolicyNames() {
  std::vector<std::string_view> out;
  for (const Policy* p : Registry()) out.push_back(p->name());
  return out;
}

const Policy& DefaultPolicy() { return *Registry().front(); }

Status CheckRequest(const NodeModel& model, GpuSet free, const Request& request) {
  const int n = model.gpu_count();
  if (request.count < 1) {
    return Unsatisfiable("job asks for " + Gpus(request.count) +
                         "; at least 1 is needed");
  }
  if (request.count > n) {
    return Unsatisfiable("job asks for " + Gpus(request.count) + "; node has " +
                         std::to_string(n));
  }
  const GpuSet all = model.all_gpus();
  if (!free.IsSubsetOf(all)) {
    return InvalidArgument("free GPUs " + (free - all).ToString() +
                           " are not on this node (GPUs " + all.ToString() + ")");
  }
  if (!request.required.IsSubsetOf(all)) {
    return InvalidArgument("required GPUs " + (request.required - all).ToString() +
                           " are not on this node (GPUs " + all.ToString() + ")");
  }
  if (!request.required.IsSubsetOf(free)) {
    return InvalidArgument("required GPUs " + (request.required - free).ToString() +
                           " are not free (free: " +
                           (free.empty() ? std::string("none") : free.ToString()) + ")");
  }
  if (request.required.size() > request.count) {
    return InvalidArgument(Gpus(request.required.size()) + " required (" +
                           request.required.ToString() + ") but the job asks for " +
                           std::to_string(request.count));
  }
  if (free.size() < request.count) {
    return Busy("needs " + Gpus(request.count) + ", " + std::to_string(free.size()) +
                " free" + (free.empty() ? std::string() : ": " + free.ToString()));
  }
  return Status::Ok();
}

}  // namespace hachi::alloc
