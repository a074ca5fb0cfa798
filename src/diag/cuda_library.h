// The CUDA driver library (libcuda.so.1) loaded with dlopen, once per process and path,
// and the function pointers `hachi commtest` calls (their types: cuda_api.h). Loaded by
// core/dynamic_library.h, as NVML is: LoadCuda may be called from any thread; the first
// call for a path opens the library and looks up every symbol under a lock, later calls
// return the same immutable object, which lives until exit (the library is never closed).
// A failed load is not remembered. Loading does not call cuInit: the user does.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "diag/cuda_api.h"

namespace hachi::diag {

// The library tried when neither the caller nor the environment names one.
inline constexpr const char* kCudaLibrary = "libcuda.so.1";

// `library` when set, else $HACHI_CUDA_LIBRARY when set, else kCudaLibrary.
std::string ResolveCudaLibrary(std::string_view library);

// The functions of one loaded driver. All are required except get_error_string (its
// absence gives "CUDA error N" alone); a test may fill one by hand with fakes.
struct CudaApi {
  std::string path;  // as given to dlopen

  cuda::InitFn* init = nullptr;
  cuda::DriverGetVersionFn* driver_version = nullptr;
  cuda::DeviceGetCountFn* device_count = nullptr;
  cuda::DeviceGetFn* device_get = nullptr;
  cuda::DeviceGetNameFn* device_name = nullptr;
  cuda::DeviceGetPCIBusIdFn* device_bus_id = nullptr;
  cuda::DevicePrimaryCtxRetainFn* ctx_retain = nullptr;
  cuda::DevicePrimaryCtxReleaseFn* ctx_release = nullptr;  // ..._v2
  cuda::CtxSetCurrentFn* ctx_set_current = nullptr;
  cuda::DeviceCanAccessPeerFn* can_access_peer = nullptr;
  cuda::CtxEnablePeerAccessFn* enable_peer = nullptr;
  cuda::MemAllocFn* mem_alloc = nullptr;  // cuMemAlloc_v2
  cuda::MemFreeFn* mem_free = nullptr;    // cuMemFree_v2
  cuda::MemHostAllocFn* host_alloc = nullptr;
  cuda::MemFreeHostFn* host_free = nullptr;
  cuda::MemcpyHtoDAsyncFn* copy_htod = nullptr;  // _v2
  cuda::MemcpyDtoHAsyncFn* copy_dtoh = nullptr;  // _v2
  cuda::MemcpyDtoDAsyncFn* copy_dtod = nullptr;  // _v2
  cuda::MemcpyPeerAsyncFn* copy_peer = nullptr;
  cuda::StreamCreateFn* stream_create = nullptr;
  cuda::StreamDestroyFn* stream_destroy = nullptr;  // _v2
  cuda::StreamSynchronizeFn* stream_sync = nullptr;
  cuda::EventCreateFn* event_create = nullptr;
  cuda::EventRecordFn* event_record = nullptr;
  cuda::EventSynchronizeFn* event_sync = nullptr;
  cuda::EventElapsedTimeFn* event_elapsed = nullptr;
  cuda::EventDestroyFn* event_destroy = nullptr;       // _v2
  cuda::GetErrorStringFn* get_error_string = nullptr;  // optional

  // "out of memory (CUDA error 2)".
  std::string ErrorText(cuda::Result rc) const;
};

// The driver at `path` (see ResolveCudaLibrary). kUnavailable when it cannot be loaded
// ("no CUDA driver: libcuda.so.1: <dlerror>") or lacks a required symbol (named).
Result<const CudaApi*> LoadCuda(const std::string& path);

}  // namespace hachi::diag
