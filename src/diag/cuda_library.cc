#include "diag/cuda_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "core/mutex.h"

namespace hachi::diag {
namespace {

// Looks `name` up; returns false (and leaves slot null) when missing.
template <typename Fn>
bool LookUp(void* handle, const char* name, Fn*& slot) {
  void* p = dlsym(handle, name);
  // dlsym returns functions as void*; POSIX guarantees the round trip.
  static_assert(sizeof(p) == sizeof(slot));
  std::memcpy(&slot, &p, sizeof(slot));
  return p != nullptr;
}

// Every symbol, looked up once. Returns the first required one that is missing.
const char* LookUpAll(void* h, CudaApi& a) {
#define HACHI_CUDA_REQUIRED(name, slot) \
  if (!LookUp(h, name, a.slot)) return name;
  HACHI_CUDA_REQUIRED("cuInit", init)
  HACHI_CUDA_REQUIRED("cuDriverGetVersion", driver_version)
  HACHI_CUDA_REQUIRED("cuDeviceGetCount", device_count)
  HACHI_CUDA_REQUIRED("cuDeviceGet", device_get)
  HACHI_CUDA_REQUIRED("cuDeviceGetName", device_name)
  HACHI_CUDA_REQUIRED("cuDeviceGetPCIBusId", device_bus_id)
  HACHI_CUDA_REQUIRED("cuDevicePrimaryCtxRetain", ctx_retain)
  HACHI_CUDA_REQUIRED("cuDevicePrimaryCtxRelease_v2", ctx_release)
  HACHI_CUDA_REQUIRED("cuCtxSetCurrent", ctx_set_current)
  HACHI_CUDA_REQUIRED("cuDeviceCanAccessPeer", can_access_peer)
  HACHI_CUDA_REQUIRED("cuCtxEnablePeerAccess", enable_peer)
  HACHI_CUDA_REQUIRED("cuMemAlloc_v2", mem_alloc)
  HACHI_CUDA_REQUIRED("cuMemFree_v2", mem_free)
  HACHI_CUDA_REQUIRED("cuMemHostAlloc", host_alloc)
  HACHI_CUDA_REQUIRED("cuMemFreeHost", host_free)
  HACHI_CUDA_REQUIRED("cuMemcpyHtoDAsync_v2", copy_htod)
  HACHI_CUDA_REQUIRED("cuMemcpyDtoHAsync_v2", copy_dtoh)
  HACHI_CUDA_REQUIRED("cuMemcpyDtoDAsync_v2", copy_dtod)
  HACHI_CUDA_REQUIRED("cuMemcpyPeerAsync", copy_peer)
  HACHI_CUDA_REQUIRED("cuStreamCreate", stream_create)
  HACHI_CUDA_REQUIRED("cuStreamDestroy_v2", stream_destroy)
  HACHI_CUDA_REQUIRED("cuStreamSynchronize", stream_sync)
  HACHI_CUDA_REQUIRED("cuEventCreate", event_create)
  HACHI_CUDA_REQUIRED("cuEventRecord", event_record)
  HACHI_CUDA_REQUIRED("cuEventSynchronize", event_sync)
  HACHI_CUDA_REQUIRED("cuEventElapsedTime", event_elapsed)
  HACHI_CUDA_REQUIRED("cuEventDestroy_v2", event_destroy)
#undef HACHI_CUDA_REQUIRED
  LookUp(h, "cuGetErrorString", a.get_error_string);
  return nullptr;
}

}  // namespace

std::string ResolveCudaLibrary(std::string_view library) {
  if (!library.empty()) return std::string(library);
  const char* env = std::getenv("HACHI_CUDA_LIBRARY");
  if (env && *env) return env;
  return kCudaLibrary;
}

std::string CudaApi::ErrorText(cuda::Result rc) const {
  const char* s = nullptr;
  if (get_error_string == nullptr || get_error_string(rc, &s) != cuda::kSuccess) {
    s = nullptr;
  }
  return std::string(s ? s : "unknown error") + " (CUDA error " + std::to_string(rc) +
         ")";
}

Result<const CudaApi*> LoadCuda(const std::string& path) {
  // Loaded libraries by path; never removed, so the pointers stay valid until exit.
  struct Loaded {
    Mutex mu;
    std::map<std::string, std::unique_ptr<const CudaApi>> by_path GUARDED_BY(mu);
  };
  static auto* loaded = new Loaded();
  MutexLock lock(&loaded->mu);
  if (auto it = loaded->by_path.find(path); it != loaded->by_path.end()) {
    return it->second.get();
  }

  dlerror();  // clear an older error
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return Unavailable("no CUDA driver: " + path + ": " + (why ? why : "unknown error") +
                       "; HACHI_CUDA_LIBRARY or --cuda-library may name the library");
  }
  auto api = std::make_unique<CudaApi>();
  api->path = path;
  if (const char* missing = LookUpAll(handle, *api)) {
    dlclose(handle);  // nothing of it was called
    return Unavailable(path + " has no " + missing +
                       "; the NVIDIA driver is too old or this is not libcuda");
  }
  const CudaApi* out = api.get();
  loaded->by_path.emplace(path, std::move(api));
  return out;
}

}  // namespace hachi::diag
