// The /dev/nvidia-caps devices a job on a MIG device needs. CUDA opens, besides
// /dev/nvidiaN of the GPU, the "access" capability of the MIG device's GPU instance and
// of its compute instance: character devices /dev/nvidia-caps/nvidia-cap<minor>, whose
// minors the driver lists in /proc/driver/nvidia-caps/mig-minors
//   config 1
//   monitor 2
//   gpu0/gi1/access 12
//   gpu0/gi1/ci0/access 13
// and whose major is "nvidia-caps" in /proc/devices. "gpu0" there is the GPU's device
// minor (/dev/nvidia0, nvmlDeviceGetMinorNumber), which is usually but not always its
// index. For the agent's cgroup device rules (not used yet: MIG devices are discovered
// and shown, not scheduled). Pure functions and a plain value; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/status.h"

namespace hachi::topo {

// What one MIG device needs: the nvidia-caps major and the two access minors.
struct MigCapDevices {
  int major = -1;
  int gi_minor = -1;  // gpuN/giG/access
  int ci_minor = -1;  // gpuN/giG/ciC/access
  friend bool operator==(const MigCapDevices&, const MigCapDevices&) = default;
};

struct MigCaps {
  int major = -1;                     // "nvidia-caps" in /proc/devices
  std::map<std::string, int> minors;  // "gpu0/gi1/ci0/access" -> 13, "config" -> 1

  // The caps of the MIG device (gpu minor, GPU instance, compute instance). kNotFound
  // naming the path mig-minors lacks (the instance does not exist, or was made after
  // the file was read).
  Result<MigCapDevices> Find(int gpu, int gi, int ci) const;
};

// /proc/driver/nvidia-caps/mig-minors: "<path> <minor>" lines. Errors name the line.
Result<std::map<std::string, int>> ParseMigMinors(std::string_view text,
                                                  std::string_view origin);
// The major of "nvidia-caps" among /proc/devices' character devices; kNotFound when the
// driver has not registered it (no MIG support loaded).
Result<int> ParseNvidiaCapsMajor(std::string_view text, std::string_view origin);
// Both files under `root` ("/" on a node; tests give a temporary tree).
Result<MigCaps> ReadMigCaps(const std::string& root = "/");

// "/dev/nvidia-caps/nvidia-cap13".
std::string NvidiaCapPath(int minor);

}  // namespace hachi::topo
