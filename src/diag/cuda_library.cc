#include "diag/cuda_library.h"

#include "core/dynamic_library.h"
#include "core/mutex.h"

namespace hachi::diag {
namespace {

// Every symbol, looked up once. Returns the first required one that is missing.
const char* LookUpAll(const DynamicLibrary& h, CudaApi& a) {
#define HACHI_CUDA_REQUIRED(name, slot) \
  if (!h.Find(name, a.slot)) return name;
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
  h.Find("cuGetErrorString", a.get_error_string);
  return nullptr;
}

std::string CannotOpen(const std::string& path, const std::string& why) {
  return "no CUDA driver: " + path + ": " + why +
         "; HACHI_CUDA_LIBRARY or --cuda-library may name the library";
}

}  // namespace

std::string ResolveCudaLibrary(std::string_view library) {
  return ResolveLibraryPath(library, "HACHI_CUDA_LIBRARY", kCudaLibrary);
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
  static auto* loaded = new LoadedLibraries<CudaApi>(
      LookUpAll, {CannotOpen, "the NVIDIA driver is too old or this is not libcuda"});
  return loaded->Get(path);
}

}  // namespace hachi::diag
