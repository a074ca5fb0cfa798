// Our own minimal declarations of the CUDA driver API (libcuda.so.1), for loading it with
// dlopen: only the types, constants and function signatures `hachi commtest`
// (diag/commtest.h) uses. Written from NVIDIA's public driver API documentation; no
// toolkit header is needed at build or run time (as topo/nvml_api.h does for NVML).
// The symbol names are those libcuda.so.1 exports for 64-bit callers: the _v2 entry
// points of the functions whose size_t/CUdeviceptr arguments widened in CUDA 3.2
// (cuMemAlloc_v2, cuMemFree_v2, cuMemcpy*Async_v2) and of those redefined in CUDA 4.0
// (cuStreamDestroy_v2, cuEventDestroy_v2); cuDevicePrimaryCtxRelease is exported as
// cuDevicePrimaryCtxRelease_v2 since CUDA 11.
#pragma once

#include <cstddef>

namespace hachi::diag::cuda {

// CUresult: an enum, passed as a C int.
using Result = int;
inline constexpr Result kSuccess = 0;
inline constexpr Result kErrorInvalidValue = 1;
inline constexpr Result kErrorOutOfMemory = 2;
inline constexpr Result kErrorNotInitialized = 3;
inline constexpr Result kErrorNoDevice = 100;
inline constexpr Result kErrorInvalidDevice = 101;
inline constexpr Result kErrorInvalidContext = 201;
inline constexpr Result kErrorPeerAccessUnsupported = 217;
inline constexpr Result kErrorPeerAccessAlreadyEnabled = 704;
inline constexpr Result kErrorNotReady = 600;
inline constexpr Result kErrorUnknown = 999;

using Device = int;                    // CUdevice: an ordinal
using DevicePtr = unsigned long long;  // CUdeviceptr (64-bit)
struct CtxOpaque;
using Context = CtxOpaque*;  // CUcontext
struct StreamOpaque;
using Stream = StreamOpaque*;  // CUstream
struct EventOpaque;
using Event = EventOpaque*;  // CUevent
static_assert(sizeof(DevicePtr) == 8);

inline constexpr unsigned kStreamNonBlocking = 0x1;     // CU_STREAM_NON_BLOCKING
inline constexpr unsigned kEventDefault = 0x0;          // CU_EVENT_DEFAULT (timing on)
inline constexpr unsigned kMemHostAllocPortable = 0x1;  // CU_MEMHOSTALLOC_PORTABLE

extern "C" {
using InitFn = Result(unsigned int flags);                        // cuInit
using DriverGetVersionFn = Result(int* version);                  // cuDriverGetVersion
using DeviceGetCountFn = Result(int* count);                      // cuDeviceGetCount
using DeviceGetFn = Result(Device* device, int ordinal);          // cuDeviceGet
using DeviceGetNameFn = Result(char* name, int len, Device dev);  // cuDeviceGetName
using DeviceGetPCIBusIdFn = Result(char* bus_id, int len, Device dev);
using DevicePrimaryCtxRetainFn = Result(Context* ctx, Device dev);
using DevicePrimaryCtxReleaseFn = Result(Device dev);  // cuDevicePrimaryCtxRelease_v2
using CtxSetCurrentFn = Result(Context ctx);
using DeviceCanAccessPeerFn = Result(int* can, Device dev, Device peer);
using CtxEnablePeerAccessFn = Result(Context peer, unsigned int flags);
using MemAllocFn = Result(DevicePtr* ptr, size_t bytes);  // cuMemAlloc_v2
using MemFreeFn = Result(DevicePtr ptr);                  // cuMemFree_v2
using MemHostAllocFn = Result(void** ptr, size_t bytes, unsigned int flags);
using MemFreeHostFn = Result(void* ptr);
using MemcpyHtoDAsyncFn = Result(DevicePtr dst, const void* src, size_t bytes, Stream s);
using MemcpyDtoHAsyncFn = Result(void* dst, DevicePtr src, size_t bytes, Stream s);
using MemcpyDtoDAsyncFn = Result(DevicePtr dst, DevicePtr src, size_t bytes, Stream s);
using MemcpyPeerAsyncFn = Result(DevicePtr dst, Context dst_ctx, DevicePtr src,
                                 Context src_ctx, size_t bytes, Stream s);
using StreamCreateFn = Result(Stream* s, unsigned int flags);
using StreamDestroyFn = Result(Stream s);  // cuStreamDestroy_v2
using StreamSynchronizeFn = Result(Stream s);
using EventCreateFn = Result(Event* e, unsigned int flags);
using EventRecordFn = Result(Event e, Stream s);
using EventSynchronizeFn = Result(Event e);
using EventElapsedTimeFn = Result(float* ms, Event start, Event end);
using EventDestroyFn = Result(Event e);  // cuEventDestroy_v2
using GetErrorStringFn = Result(Result error, const char** text);
}

}  // namespace hachi::diag::cuda
