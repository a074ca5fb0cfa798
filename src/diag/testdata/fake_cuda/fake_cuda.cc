// A fake CUDA driver (built as libcuda.so.1) for `hachi commtest`'s tests: it simulates
// the node of the Hachi topology file named by $HACHI_FAKE_NVML_TOPOLOGY (the file the
// fake NVML reads), answering the calls of diag/cuda_api.h. No data moves and nothing
// sleeps: device pointers are made-up addresses, host allocations are real.
//
// Time is virtual. Every copy occupies the resources it crosses, each with a time at
// which it is next free:
//   - a pair with NV<n> on a mesh (DGX-1, bridged pairs): that pair's links, one way;
//   - on an NVSwitch node (every pair the same NV<n>): the sender's NVLinks out;
//   - over PCIe: the sender's link up (host-to-device copies: the GPU's link down).
// A copy starts when the host has issued it (the host's virtual time advances when it
// waits on an event or stream), its stream is done with earlier work and all its
// resources are free; it takes latency + bytes /
// rate, and holds them until it ends: copies sharing a resource queue behind each other,
// which divides that resource's bandwidth among them (the all-pairs run's contention).
// Rates are 85 % of the theoretical link rate of the GPU model (H100/H200/H800: NVLink 4
// and PCIe gen 5, A100/A800: NVLink 3 and gen 4, V100: NVLink 2 and gen 3, others gen 4,
// x16), so a healthy node passes commtest's 70 % threshold. Events take their stream's
// clock; cuEventElapsedTime is the difference. Deterministic: no host clock is read.
//
// Knobs:
//   HACHI_FAKE_CUDA_DEGRADE=a-b:f[,..]  that pair's NVLink (or P2P) copies at f of the
//                                       link's theoretical rate, both ways
//   HACHI_FAKE_CUDA_NO_P2P=a-b[,..]     no peer access between them (copies go through
//                                       the host: both PCIe links, at half rate)
//   HACHI_FAKE_CUDA_INIT_ERROR=<n>      cuInit fails with CUresult n
// The node and knobs are read at cuInit, again whenever they changed (tests simulate
// several nodes in one process). Thread-safe: one mutex guards the state.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "diag/cuda_api.h"
#include "topo/topology_file.h"

namespace cuda = hachi::diag::cuda;

struct hachi::diag::cuda::CtxOpaque {
  int device;
};
struct hachi::diag::cuda::StreamOpaque {
  int device;
  double clock_us;
};
struct hachi::diag::cuda::EventOpaque {
  double at_us;
  bool recorded;
};

namespace {

constexpr double kEfficiency = 0.85;
constexpr double kNvLinkLatencyUs = 2.0;
constexpr double kPcieLatencyUs = 5.0;

struct Gpu {
  std::string model;
  double nvlink_gbps = 0;  // per link, one way, at kEfficiency
  double pcie_gbps = 0;    // one way, at kEfficiency
  double memory_gbps = 0;  // device-to-device copy
};

struct State {
  bool initialised = false;
  std::string signature;  // the topology path and knobs this state was built from
  hachi::topo::Topology topo;
  bool nvswitch = false;
  std::vector<Gpu> gpus;
  std::vector<std::unique_ptr<cuda::CtxOpaque>> contexts;
  std::vector<std::unique_ptr<cuda::StreamOpaque>> streams;
  std::vector<std::unique_ptr<cuda::EventOpaque>> events;
  std::map<std::pair<int, int>, double> degrade;  // (a<b) -> factor
  std::set<std::pair<int, int>> no_p2p;
  std::map<std::string, double> free_at;  // resource -> virtual time it is free
  std::map<cuda::DevicePtr, size_t> allocations;
  cuda::DevicePtr next_ptr = 1ULL << 40;
  // The host's virtual time: how far it has waited (cuEventSynchronize,
  // cuStreamSynchronize). Work given to an idle stream starts there, as on a GPU.
  double host_us = 0;
};

State& S() {
  static State s;
  return s;
}
std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
thread_local cuda::CtxOpaque* current = nullptr;

bool Has(const std::string& m, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (m.find(n) != std::string::npos) return true;
  }
  return false;
}

Gpu ModelGpu(const std::string& m) {
  Gpu g;
  g.model = m;
  double pcie_gen_gbps = 31.5;  // gen 4 x16
  double nvlink = 25;
  g.memory_gbps = 600;
  if (Has(m, {"H100", "H200", "H800"})) {
    pcie_gen_gbps = 63.0;
    g.memory_gbps = 1500;
  } else if (Has(m, {"A100", "A800"})) {
    g.memory_gbps = 800;
  } else if (Has(m, {"V100"})) {
    pcie_gen_gbps = 15.75;
    g.memory_gbps = 380;
  }
  g.pcie_gbps = pcie_gen_gbps * kEfficiency;
  g.nvlink_gbps = nvlink * kEfficiency;
  return g;
}

std::pair<int, int> Key(int a, int b) { return {std::min(a, b), std::max(a, b)}; }

// "a-b:f,c-d:g" or "a-b,c-d" (factor 1).
void ParsePairs(const char* text, std::map<std::pair<int, int>, double>* out) {
  if (!text) return;
  for (std::string_view item : hachi::Split(text, ',')) {
    int a = -1, b = -1;
    double f = 1;
    std::string s(item);
    if (std::sscanf(s.c_str(), "%d-%d:%lf", &a, &b, &f) >= 2 && a >= 0 && b >= 0) {
      (*out)[Key(a, b)] = f;
    } else if (!s.empty()) {
      std::fprintf(stderr, "fake CUDA: ignoring pair '%s'\n", s.c_str());
    }
  }
}

// Starts a copy of `bytes` on `stream` across `resources` at `gbps`; advances clocks.
void Occupy(cuda::StreamOpaque* stream, const std::vector<std::string>& resources,
            double gbps, double latency_us, size_t bytes) {
  State& s = S();
  double start = std::max(stream->clock_us, s.host_us);
  for (const std::string& r : resources) start = std::max(start, s.free_at[r]);
  const double end = start + latency_us + static_cast<double>(bytes) / (gbps * 1e3);
  for (const std::string& r : resources) s.free_at[r] = end;
  stream->clock_us = end;
}

std::string Pcie(int gpu, const char* dir) { return "pcie" + std::to_string(gpu) + dir; }

}  // namespace

#define FAKE_CUDA_API extern "C" __attribute__((visibility("default")))

FAKE_CUDA_API cuda::Result cuInit(unsigned int) {
  std::lock_guard<std::mutex> lock(Mu());
  if (const char* e = std::getenv("HACHI_FAKE_CUDA_INIT_ERROR"); e && *e) {
    return std::atoi(e);
  }
  State& s = S();
  const char* path = std::getenv("HACHI_FAKE_NVML_TOPOLOGY");
  if (!path || !*path) return cuda::kErrorNoDevice;
  // A test process may simulate several nodes in turn: the node and knobs are read again
  // when they changed since the last cuInit (the real driver has one node, of course).
  std::string signature = path;
  for (const char* knob : {"HACHI_FAKE_CUDA_DEGRADE", "HACHI_FAKE_CUDA_NO_P2P"}) {
    const char* v = std::getenv(knob);
    signature += std::string("\n") + (v ? v : "");
  }
  if (s.initialised && s.signature == signature) return cuda::kSuccess;
  s = State();
  s.signature = signature;
  auto file = hachi::topo::ReadTopologyFile(path);
  if (!file.ok()) return cuda::kErrorUnknown;
  s.topo = std::move(file->topology);
  const int n = s.topo.gpu_count();
  int common = n > 1 ? s.topo.link(0, 1).nvlinks : 0;
  s.nvswitch = common > 0;
  for (int i = 0; i < n; ++i) {
    s.gpus.push_back(ModelGpu(s.topo.gpu(i).model));
    s.contexts.push_back(std::make_unique<cuda::CtxOpaque>(cuda::CtxOpaque{i}));
    for (int j = 0; j < n; ++j) {
      if (i != j && s.topo.link(i, j).nvlinks != common) s.nvswitch = false;
    }
  }
  ParsePairs(std::getenv("HACHI_FAKE_CUDA_DEGRADE"), &s.degrade);
  std::map<std::pair<int, int>, double> off;
  ParsePairs(std::getenv("HACHI_FAKE_CUDA_NO_P2P"), &off);
  for (const auto& [k, f] : off) s.no_p2p.insert(k);
  s.initialised = true;
  return cuda::kSuccess;
}

namespace {
cuda::Result Ready() {
  return S().initialised ? cuda::kSuccess : cuda::kErrorNotInitialized;
}
bool ValidDevice(int d) { return d >= 0 && d < S().topo.gpu_count(); }
}  // namespace

FAKE_CUDA_API cuda::Result cuDriverGetVersion(int* v) {
  if (!v) return cuda::kErrorInvalidValue;
  *v = 12040;
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuDeviceGetCount(int* n) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!n) return cuda::kErrorInvalidValue;
  *n = S().topo.gpu_count();
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuDeviceGet(cuda::Device* d, int ordinal) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!d) return cuda::kErrorInvalidValue;
  if (!ValidDevice(ordinal)) return cuda::kErrorInvalidDevice;
  *d = ordinal;
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuDeviceGetName(char* name, int len, cuda::Device d) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!name || len <= 0) return cuda::kErrorInvalidValue;
  if (!ValidDevice(d)) return cuda::kErrorInvalidDevice;
  std::snprintf(name, static_cast<size_t>(len), "%s", S().gpus[d].model.c_str());
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuDeviceGetPCIBusId(char* id, int len, cuda::Device d) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!id || len <= 0) return cuda::kErrorInvalidValue;
  if (!ValidDevice(d)) return cuda::kErrorInvalidDevice;
  std::snprintf(id, static_cast<size_t>(len), "%s", S().topo.gpu(d).pci_bus_id.c_str());
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuDevicePrimaryCtxRetain(cuda::Context* ctx, cuda::Device d) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!ctx) return cuda::kErrorInvalidValue;
  if (!ValidDevice(d)) return cuda::kErrorInvalidDevice;
  *ctx = S().contexts[d].get();
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuDevicePrimaryCtxRelease_v2(cuda::Device d) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  return ValidDevice(d) ? cuda::kSuccess : cuda::kErrorInvalidDevice;
}

FAKE_CUDA_API cuda::Result cuCtxSetCurrent(cuda::Context ctx) {
  current = ctx;
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuDeviceCanAccessPeer(int* can, cuda::Device a,
                                                 cuda::Device b) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!can) return cuda::kErrorInvalidValue;
  if (!ValidDevice(a) || !ValidDevice(b)) return cuda::kErrorInvalidDevice;
  *can = a != b && !S().no_p2p.count(Key(a, b)) ? 1 : 0;
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuCtxEnablePeerAccess(cuda::Context peer, unsigned int) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!current || !peer) return cuda::kErrorInvalidContext;
  if (S().no_p2p.count(Key(current->device, peer->device))) {
    return cuda::kErrorPeerAccessUnsupported;
  }
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuMemAlloc_v2(cuda::DevicePtr* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!p || bytes == 0) return cuda::kErrorInvalidValue;
  if (!current) return cuda::kErrorInvalidContext;
  State& s = S();
  *p = s.next_ptr;
  s.allocations[*p] = bytes;
  s.next_ptr += (bytes + 0xFFFF) & ~static_cast<size_t>(0xFFFF);
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuMemFree_v2(cuda::DevicePtr p) {
  std::lock_guard<std::mutex> lock(Mu());
  return S().allocations.erase(p) ? cuda::kSuccess : cuda::kErrorInvalidValue;
}

// Host memory is real but commtest's buffers are large and never read: a small real
// allocation stands for it (the fake never touches it either).
FAKE_CUDA_API cuda::Result cuMemHostAlloc(void** p, size_t bytes, unsigned int) {
  if (!p || bytes == 0) return cuda::kErrorInvalidValue;
  *p = std::malloc(std::min<size_t>(bytes, 4096));
  return *p ? cuda::kSuccess : cuda::kErrorOutOfMemory;
}

FAKE_CUDA_API cuda::Result cuMemFreeHost(void* p) {
  std::free(p);
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuStreamCreate(cuda::Stream* st, unsigned int) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!st) return cuda::kErrorInvalidValue;
  if (!current) return cuda::kErrorInvalidContext;
  State& s = S();
  s.streams.push_back(std::make_unique<cuda::StreamOpaque>(
      cuda::StreamOpaque{current->device, s.host_us}));
  *st = s.streams.back().get();
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuStreamDestroy_v2(cuda::Stream) { return cuda::kSuccess; }
FAKE_CUDA_API cuda::Result cuStreamSynchronize(cuda::Stream st) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!st) return cuda::kErrorInvalidValue;
  S().host_us = std::max(S().host_us, st->clock_us);
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuEventCreate(cuda::Event* e, unsigned int) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!e) return cuda::kErrorInvalidValue;
  S().events.push_back(std::make_unique<cuda::EventOpaque>(cuda::EventOpaque{0, false}));
  *e = S().events.back().get();
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuEventRecord(cuda::Event e, cuda::Stream st) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!e || !st) return cuda::kErrorInvalidValue;
  st->clock_us = std::max(st->clock_us, S().host_us);
  e->at_us = st->clock_us;
  e->recorded = true;
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuEventSynchronize(cuda::Event e) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!e || !e->recorded) return cuda::kErrorInvalidValue;
  S().host_us = std::max(S().host_us, e->at_us);
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuEventElapsedTime(float* ms, cuda::Event a, cuda::Event b) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!ms || !a || !b) return cuda::kErrorInvalidValue;
  if (!a->recorded || !b->recorded) return cuda::kErrorNotReady;
  *ms = static_cast<float>((b->at_us - a->at_us) / 1e3);
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuEventDestroy_v2(cuda::Event) { return cuda::kSuccess; }

FAKE_CUDA_API cuda::Result cuMemcpyHtoDAsync_v2(cuda::DevicePtr, const void*,
                                                size_t bytes, cuda::Stream st) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!st) return cuda::kErrorInvalidValue;
  Occupy(st, {Pcie(st->device, "down")}, S().gpus[st->device].pcie_gbps, kPcieLatencyUs,
         bytes);
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuMemcpyDtoHAsync_v2(void*, cuda::DevicePtr, size_t bytes,
                                                cuda::Stream st) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!st) return cuda::kErrorInvalidValue;
  Occupy(st, {Pcie(st->device, "up")}, S().gpus[st->device].pcie_gbps, kPcieLatencyUs,
         bytes);
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuMemcpyDtoDAsync_v2(cuda::DevicePtr, cuda::DevicePtr,
                                                size_t bytes, cuda::Stream st) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!st) return cuda::kErrorInvalidValue;
  Occupy(st, {"mem" + std::to_string(st->device)}, S().gpus[st->device].memory_gbps, 1.0,
         bytes);
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuMemcpyPeerAsync(cuda::DevicePtr, cuda::Context dst_ctx,
                                             cuda::DevicePtr, cuda::Context src_ctx,
                                             size_t bytes, cuda::Stream st) {
  std::lock_guard<std::mutex> lock(Mu());
  if (auto rc = Ready(); rc != cuda::kSuccess) return rc;
  if (!st || !dst_ctx || !src_ctx) return cuda::kErrorInvalidValue;
  State& s = S();
  const int a = src_ctx->device, b = dst_ctx->device;
  if (a == b) {
    Occupy(st, {"mem" + std::to_string(a)}, s.gpus[a].memory_gbps, 1.0, bytes);
    return cuda::kSuccess;
  }
  auto d = s.degrade.find(Key(a, b));
  // A degraded pair runs at f of its theoretical rate (not of the 85 % a healthy one
  // gets).
  const double factor = d == s.degrade.end() ? 1.0 : d->second / kEfficiency;
  const int links = s.topo.link(a, b).nvlinks;
  if (s.no_p2p.count(Key(a, b))) {  // staged through host memory
    Occupy(st, {Pcie(a, "up"), Pcie(b, "down")},
           std::min(s.gpus[a].pcie_gbps, s.gpus[b].pcie_gbps) * 0.5 * factor,
           2 * kPcieLatencyUs, bytes);
  } else if (links > 0) {
    const std::string res = s.nvswitch
                                ? "nvout" + std::to_string(a)
                                : "nv" + std::to_string(a) + ">" + std::to_string(b);
    Occupy(st, {res},
           links * std::min(s.gpus[a].nvlink_gbps, s.gpus[b].nvlink_gbps) * factor,
           kNvLinkLatencyUs, bytes);
  } else {
    Occupy(st, {Pcie(a, "up")},
           std::min(s.gpus[a].pcie_gbps, s.gpus[b].pcie_gbps) * factor, kPcieLatencyUs,
           bytes);
  }
  return cuda::kSuccess;
}

FAKE_CUDA_API cuda::Result cuGetErrorString(cuda::Result rc, const char** text) {
  if (!text) return cuda::kErrorInvalidValue;
  switch (rc) {
    case cuda::kSuccess:
      *text = "no error";
      break;
    case cuda::kErrorInvalidValue:
      *text = "invalid argument";
      break;
    case cuda::kErrorNotInitialized:
      *text = "initialization error";
      break;
    case cuda::kErrorNoDevice:
      *text = "no CUDA-capable device is detected";
      break;
    case cuda::kErrorInvalidDevice:
      *text = "invalid device ordinal";
      break;
    default:
      *text = "unknown error";
  }
  return cuda::kSuccess;
}
