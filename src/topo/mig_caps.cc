#include "topo/mig_caps.h"

#include <optional>

#include "core/strings.h"

namespace hachi::topo {
namespace {

// Minors are 20 bits in Linux's dev_t.
constexpr long long kMaxMinor = (1 << 20) - 1;

std::string Under(const std::string& root, const char* path) {
  return root == "/" || root.empty() ? std::string(path) : root + path;
}

}  // namespace

Result<std::map<std::string, int>> ParseMigMinors(std::string_view text,
                                                  std::string_view origin) {
  std::map<std::string, int> out;
  std::vector<std::string_view> lines = SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view s = Trim(lines[i]);
    if (s.empty()) continue;
    const size_t sp = s.find_last_of(" \t");
    std::optional<long long> minor =
        sp == std::string_view::npos ? std::nullopt : ParseInt(Trim(s.substr(sp + 1)));
    std::string_view path = sp == std::string_view::npos ? s : Trim(s.substr(0, sp));
    if (!minor || *minor < 0 || *minor > kMaxMinor || path.empty()) {
      return InvalidArgument(std::string(origin) + ":" + std::to_string(i + 1) +
                             ": expected '<capability> <minor>', got '" + std::string(s) +
                             "'");
    }
    out[std::string(path)] = static_cast<int>(*minor);
  }
  return out;
}

Result<int> ParseNvidiaCapsMajor(std::string_view text, std::string_view origin) {
  bool character = false;
  for (std::string_view line : SplitLines(text)) {
    std::string_view s = Trim(line);
    if (s == "Character devices:") {
      character = true;
    } else if (s == "Block devices:") {
      character = false;
    } else if (character) {
      // "234 nvidia-caps"; "nvidia-caps-imex-channels" is another device.
      const size_t sp = s.find_first_of(" \t");
      if (sp == std::string_view::npos || Trim(s.substr(sp + 1)) != "nvidia-caps") {
        continue;
      }
      std::optional<long long> major = ParseInt(s.substr(0, sp));
      if (major && *major > 0 && *major < 4096) return static_cast<int>(*major);
    }
  }
  return NotFound(std::string(origin) +
                  ": no nvidia-caps character device (the driver's MIG support is not "
                  "loaded)");
}

Result<MigCaps> ReadMigCaps(const std::string& root) {
  MigCaps caps;
  std::string error;
  const std::string minors_path = Under(root, "/proc/driver/nvidia-caps/mig-minors");
  std::optional<std::string> minors = ReadFile(minors_path, &error);
  if (!minors) return NotFound(error);
  Result<std::map<std::string, int>> parsed = ParseMigMinors(*minors, minors_path);
  if (!parsed.ok()) return parsed.status();
  caps.minors = std::move(*parsed);
  const std::string devices_path = Under(root, "/proc/devices");
  std::optional<std::string> devices = ReadFile(devices_path, &error);
  if (!devices) return NotFound(error);
  Result<int> major = ParseNvidiaCapsMajor(*devices, devices_path);
  if (!major.ok()) return major.status();
  caps.major = *major;
  return caps;
}

Result<MigCapDevices> MigCaps::Find(int gpu, int gi, int ci) const {
  const std::string gi_path =
      "gpu" + std::to_string(gpu) + "/gi" + std::to_string(gi) + "/access";
  const std::string ci_path = "gpu" + std::to_string(gpu) + "/gi" + std::to_string(gi) +
                              "/ci" + std::to_string(ci) + "/access";
  auto g = minors.find(gi_path);
  if (g == minors.end()) return NotFound("mig-minors has no " + gi_path);
  auto c = minors.find(ci_path);
  if (c == minors.end()) return NotFound("mig-minors has no " + ci_path);
  return MigCapDevices{major, g->second, c->second};
}

std::string NvidiaCapPath(int minor) {
  return "/dev/nvidia-caps/nvidia-cap" + std::to_string(minor);
}

}  // namespace hachi::topo
