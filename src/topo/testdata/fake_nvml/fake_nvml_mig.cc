// The fake NVML's MIG devices (the `migdev` line and "mig_devices" in the topology file;
// see fake_nvml.cc's header comment): MIG device handles and what they answer, the way
// NVML reports a GPU split into instances.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/strings.h"
#include "topo/testdata/fake_nvml/fake_nvml_state.h"

namespace fake_nvml {
namespace {

using hachi::topo::MigDevice;

// The profile's memory: its "<N>gb" times 0.95 GiB, as A100's 1g.5gb (4864 MiB) and
// 1g.10gb (9728 MiB) read; 0 when the profile names no size.
int64_t MemoryOfProfile(std::string_view profile) {
  for (std::string_view part : hachi::Split(profile, '.')) {
    part = part.substr(0, part.find('+'));  // "20gb+me": media extensions
    if (part.size() < 3 || part.substr(part.size() - 2) != "gb") continue;
    std::optional<long long> gb = hachi::ParseInt(part.substr(0, part.size() - 2));
    if (gb && *gb > 0 && *gb < 4096) return *gb * 1024 * 95 / 100;
  }
  return 0;
}

uint64_t Fnv1a(std::string_view text, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from the GPU's UUID and the instance ids:
// the same layout on the same GPU gets the same UUIDs in every run.
std::string UuidOf(const std::string& gpu_uuid, int gi, int ci) {
  const std::string key = gpu_uuid + "/" + std::to_string(gi) + "/" + std::to_string(ci);
  const uint64_t a = Fnv1a(key, 0xcbf29ce484222325ULL);
  const uint64_t b = Fnv1a(key, 0x84222325cbf29ce4ULL);
  char buf[64];
  std::snprintf(buf, sizeof(buf),
                "MIG-%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64,
                a >> 32, (a >> 16) & 0xFFFF, a & 0xFFFF, b >> 48,
                b & uint64_t{0xFFFFFFFFFFFF});
  return buf;
}

// Fills what the line or the file left out.
void Complete(const State& s, int gpu, unsigned slot, MigDevice& m) {
  if (m.gpu_instance < 0) m.gpu_instance = static_cast<int>(slot) + 1;
  if (m.compute_instance < 0) m.compute_instance = 0;
  if (m.memory_mib <= 0) m.memory_mib = MemoryOfProfile(m.profile);
  if (m.uuid.empty()) {
    m.uuid = UuidOf(s.topo.gpu(gpu).uuid.empty() ? "GPU-" + std::to_string(gpu)
                                                 : s.topo.gpu(gpu).uuid,
                    m.gpu_instance, m.compute_instance);
  }
}

// The MIG device behind a MIG handle. kSuccess, or what NVML answers for a handle that
// is not (or no longer) one: invalid argument; GPU_IS_LOST for a lost GPU.
nvml::Return UseMig(nvml::Device d, int* gpu, const MigDevice** m) {
  State& s = S();
  if (s.init_count == 0) return nvml::kErrorUninitialized;
  if (!IsMigHandle(d) || d->index < 0 || d->index >= s.topo.gpu_count()) {
    return nvml::kErrorInvalidArgument;
  }
  int parent = -1;
  // Reads pending event lines (a layout or a loss written since the last call).
  if (nvml::Return rc = Use(&s.devices[d->index], &parent); rc != nvml::kSuccess) {
    return rc;
  }
  const Hardware& h = s.hardware[parent];
  const unsigned slot = static_cast<unsigned>(d->mig);
  if (h.mig_now == 0 || slot >= kMigSlots || !h.mig[slot]) {
    return nvml::kErrorInvalidArgument;
  }
  *gpu = parent;
  *m = &*h.mig[slot];
  return nvml::kSuccess;
}

}  // namespace

bool ApplyMigLine(State& s, const std::vector<std::string>& f, int gpu) {
  if (f.size() < 2 || f.size() - 2 > kMigSlots) return false;
  Hardware& h = s.hardware[gpu];
  decltype(h.mig) layout;
  for (size_t k = 2; k < f.size(); ++k) {
    const unsigned slot = static_cast<unsigned>(k - 2);
    if (f[k] == "-") continue;
    std::vector<std::string_view> parts = hachi::Split(f[k], '/');
    if (parts.size() != 1 && parts.size() != 3) return false;
    MigDevice m;
    m.profile = std::string(parts[0]);
    if (m.profile.empty()) return false;
    if (parts.size() == 3) {
      std::optional<long long> gi = hachi::ParseInt(parts[1]);
      std::optional<long long> ci = hachi::ParseInt(parts[2]);
      if (!gi || !ci || *gi < 0 || *ci < 0 || *gi > 1000 || *ci > 1000) return false;
      m.gpu_instance = static_cast<int>(*gi);
      m.compute_instance = static_cast<int>(*ci);
    }
    Complete(s, gpu, slot, m);
    layout[slot] = std::move(m);
  }
  h.mig = std::move(layout);
  h.mig_now = h.mig_pending = 1;
  return true;
}

void SeedMig(State& s) {
  for (int g = 0; g < s.topo.gpu_count(); ++g) {
    const hachi::topo::Gpu& gpu = s.topo.gpu(g);
    if (!gpu.mig_enabled) continue;
    Hardware& h = s.hardware[g];
    h.mig_now = h.mig_pending = 1;
    for (unsigned k = 0; k < gpu.mig_devices.size() && k < kMigSlots; ++k) {
      MigDevice m = gpu.mig_devices[k];
      Complete(s, g, k, m);
      h.mig[k] = std::move(m);
    }
  }
}

nvml::Return MigName(nvml::Device d, char* out, unsigned int size) {
  int gpu = -1;
  const MigDevice* m = nullptr;
  if (nvml::Return rc = UseMig(d, &gpu, &m); rc != nvml::kSuccess) return rc;
  if (Unsupported("nvmlDeviceGetName")) return nvml::kErrorNotSupported;
  // As the driver names them: "NVIDIA A100-SXM4-40GB MIG 1g.5gb".
  return CopyString(S().topo.gpu(gpu).model + " MIG " + m->profile, out, size);
}

nvml::Return MigUuid(nvml::Device d, char* out, unsigned int size) {
  int gpu = -1;
  const MigDevice* m = nullptr;
  if (nvml::Return rc = UseMig(d, &gpu, &m); rc != nvml::kSuccess) return rc;
  if (Unsupported("nvmlDeviceGetUUID")) return nvml::kErrorNotSupported;
  return CopyString(m->uuid, out, size);
}

nvml::Return MigMemory(nvml::Device d, nvml::Memory* mem) {
  int gpu = -1;
  const MigDevice* m = nullptr;
  if (nvml::Return rc = UseMig(d, &gpu, &m); rc != nvml::kSuccess) return rc;
  if (!mem) return nvml::kErrorInvalidArgument;
  mem->total = static_cast<unsigned long long>(m->memory_mib) << 20;
  mem->free = mem->total;
  mem->used = 0;
  return nvml::kSuccess;
}

nvml::Return MigProcesses(nvml::Device d, unsigned int* count, nvml::ProcessInfo* infos) {
  int gpu = -1;
  const MigDevice* m = nullptr;
  if (nvml::Return rc = UseMig(d, &gpu, &m); rc != nvml::kSuccess) return rc;
  if (!count) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetComputeRunningProcesses_v3")) {
    return nvml::kErrorNotSupported;
  }
  std::vector<nvml::ProcessInfo> mine;
  for (const auto& [pid, p] : S().health[gpu].processes) {
    if (p.gpu_instance == static_cast<unsigned>(m->gpu_instance) &&
        p.compute_instance == static_cast<unsigned>(m->compute_instance)) {
      mine.push_back({pid, p.bytes, p.gpu_instance, p.compute_instance});
    }
  }
  if (*count < mine.size() || (!infos && !mine.empty())) {
    *count = static_cast<unsigned>(mine.size());
    return nvml::kErrorInsufficientSize;
  }
  if (!mine.empty()) std::memcpy(infos, mine.data(), mine.size() * sizeof(mine[0]));
  *count = static_cast<unsigned>(mine.size());
  return nvml::kSuccess;
}

}  // namespace fake_nvml

using fake_nvml::Hardware;
using fake_nvml::kMigSlots;
using fake_nvml::Mu;
using fake_nvml::S;
using fake_nvml::Unsupported;

FAKE_NVML_API nvml::Return nvmlDeviceGetMaxMigDeviceCount(nvml::Device d,
                                                          unsigned int* count) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = fake_nvml::Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!count) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetMaxMigDeviceCount")) return nvml::kErrorNotSupported;
  // NVML: zero when MIG is off.
  *count = S().hardware[i].mig_now ? kMigSlots : 0;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetMigDeviceHandleByIndex(nvml::Device d,
                                                               unsigned int index,
                                                               nvml::Device* mig) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = fake_nvml::Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!mig || index >= kMigSlots) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetMigDeviceHandleByIndex")) {
    return nvml::kErrorNotSupported;
  }
  const Hardware& h = S().hardware[i];
  if (h.mig_now == 0) return nvml::kErrorNotSupported;
  if (!h.mig[index]) return nvml::kErrorNotFound;
  *mig = &S().mig_handles[i][index];
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceIsMigDeviceHandle(nvml::Device d,
                                                       unsigned int* is_mig) {
  std::lock_guard<std::mutex> lock(Mu());
  if (S().init_count == 0) return nvml::kErrorUninitialized;
  if (!d || !is_mig) return nvml::kErrorInvalidArgument;
  *is_mig = fake_nvml::IsMigHandle(d) ? 1 : 0;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    nvml::Device mig, nvml::Device* parent) {
  std::lock_guard<std::mutex> lock(Mu());
  int gpu = -1;
  const hachi::topo::MigDevice* m = nullptr;
  if (nvml::Return rc = fake_nvml::UseMig(mig, &gpu, &m); rc != nvml::kSuccess) {
    return rc;
  }
  if (!parent) return nvml::kErrorInvalidArgument;
  *parent = &S().devices[gpu];
  return nvml::kSuccess;
}

namespace {
// A MIG device's GPU or compute instance id; NOT_SUPPORTED on a GPU's own handle.
nvml::Return InstanceId(nvml::Device d, unsigned int* id, bool compute) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!fake_nvml::IsMigHandle(d)) {
    int i = -1;
    nvml::Return rc = fake_nvml::Use(d, &i);
    return rc == nvml::kSuccess ? nvml::kErrorNotSupported : rc;
  }
  int gpu = -1;
  const hachi::topo::MigDevice* m = nullptr;
  if (nvml::Return rc = fake_nvml::UseMig(d, &gpu, &m); rc != nvml::kSuccess) return rc;
  if (!id) return nvml::kErrorInvalidArgument;
  *id = static_cast<unsigned>(compute ? m->compute_instance : m->gpu_instance);
  return nvml::kSuccess;
}
}  // namespace

FAKE_NVML_API nvml::Return nvmlDeviceGetGpuInstanceId(nvml::Device d, unsigned int* id) {
  return InstanceId(d, id, false);
}

FAKE_NVML_API nvml::Return nvmlDeviceGetComputeInstanceId(nvml::Device d,
                                                          unsigned int* id) {
  return InstanceId(d, id, true);
}
