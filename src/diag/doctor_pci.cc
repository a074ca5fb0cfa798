// doctor's ACS check: PCIe Access Control Services on the switch ports above each GPU.
// With P2P Request or Completion Redirect (or Egress Control) on a switch's downstream
// port, peer-to-peer traffic between devices under that switch is sent up to the root
// complex and back instead of across the switch: GPU-to-GPU copies over PCIe and
// GPUDirect RDMA to a NIC beside the GPU lose most of their bandwidth (NCCL's
// troubleshooting guide, "PCI Access Control Services"). Linux sets these bits itself
// when an IOMMU is on. Root ports are left alone: traffic between two root ports passes
// the root complex anyway.
//
// The path from a GPU up to its root port is sysfs': /sys/bus/pci/devices/<bdf> links to
// /sys/devices/pci<domain:bus>/<root port>/<switch up>/<switch down>/<bdf>; each bridge's
// `config` file is its configuration space (the first 64 bytes for users, all 4 KiB for
// root). The standard capability list gives the port type, the extended capability
// chain from 0x100 the ACS capability (id 0x000D) and its control register (+6).
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/strings.h"
#include "diag/doctor_stages.h"

namespace hachi::diag {
namespace {

namespace fs = std::filesystem;

constexpr uint16_t kAcsReqRedir = 0x04, kAcsCmpltRedir = 0x08, kAcsEgressCtrl = 0x20;
constexpr uint16_t kAcsRedirect = kAcsReqRedir | kAcsCmpltRedir | kAcsEgressCtrl;
constexpr int kRootPort = 4;  // PCI Express Capabilities: Device/Port Type

// The ACS control bits as lspci names them.
constexpr struct {
  uint16_t bit;
  const char* name;
} kAcsBits[] = {{0x01, "SrcValid"},   {0x02, "TransBlk"},    {0x04, "ReqRedir"},
                {0x08, "CmpltRedir"}, {0x10, "UpstreamFwd"}, {0x20, "EgressCtrl"},
                {0x40, "DirectTrans"}};

struct Bridge {
  std::string bdf;        // "0000:17:00.0"
  bool readable = false;  // the extended configuration space could be read
  bool has_acs = false;
  uint16_t acs_ctrl = 0;
  int port_type = -1;  // -1: unknown
};

// "00000000:18:00.0" (NVML) -> "0000:18:00.0" (sysfs); "" when it is not one.
std::string SysfsName(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
    return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus, dev, fn);
  return buf;
}

bool IsPciAddress(const std::string& name) {
  unsigned d = 0, b = 0, s = 0, f = 0;
  char tail = 0;
  return std::sscanf(name.c_str(), "%x:%x:%x.%x%c", &d, &b, &s, &f, &tail) == 4 &&
         name.size() >= 12;
}

unsigned Byte(const std::string& c, size_t at) {
  return at < c.size() ? static_cast<unsigned char>(c[at]) : 0;
}
unsigned Le16(const std::string& c, size_t at) {
  return Byte(c, at) | Byte(c, at + 1) << 8;
}
uint32_t Le32(const std::string& c, size_t at) {
  return Le16(c, at) | static_cast<uint32_t>(Le16(c, at + 2)) << 16;
}

Bridge ReadBridge(const fs::path& dir) {
  Bridge b;
  b.bdf = dir.filename().string();
  std::string error;
  std::optional<std::string> cfg = ReadFile((dir / "config").string(), &error);
  if (!cfg || cfg->size() < 64) return b;
  const std::string& c = *cfg;
  // Standard capabilities (status bit 4 says there is a list): the PCI Express one (id
  // 0x10) has the port type in bits 7:4 of its capabilities register.
  if (Le16(c, 0x06) & 0x10) {
    size_t at = Byte(c, 0x34) & 0xFC;
    for (int hops = 0; at >= 0x40 && at + 3 < c.size() && hops < 48; ++hops) {
      if (Byte(c, at) == 0x10) {
        b.port_type = static_cast<int>(Byte(c, at + 2) >> 4);
        break;
      }
      at = Byte(c, at + 1) & 0xFC;
    }
  }
  if (c.size() < 0x108) return b;  // no extended space: not root, or a PCI bridge
  b.readable = true;
  for (size_t at = 0x100, hops = 0; at + 8 <= c.size() && hops < 512; ++hops) {
    const uint32_t header = Le32(c, at);
    if (header == 0 || header == 0xFFFFFFFF) break;
    if ((header & 0xFFFF) == 0x000D) {
      b.has_acs = true;
      b.acs_ctrl = static_cast<uint16_t>(Le16(c, at + 6));
      break;
    }
    const size_t next = (header >> 20) & 0xFFC;
    if (next < 0x100) break;
    at = next;
  }
  return b;
}

std::string AcsBits(uint16_t ctrl) {
  std::string s;
  for (const auto& [bit, name] : kAcsBits) {
    if (ctrl & bit) s += (s.empty() ? "" : " ") + std::string(name) + "+";
  }
  return s;
}

}  // namespace

std::vector<CheckItem> AcsChecks(const NvmlReadings& r, const std::string& root,
                                 int only_gpu) {
  std::vector<CheckItem> out;
  std::error_code ec;
  const fs::path top = fs::weakly_canonical(root, ec);
  for (const GpuReadings& g : r.gpus) {
    if (!Selected(only_gpu, g.index) || !g.error.empty()) continue;
    const std::string tag = "GPU " + std::to_string(g.index) + ": ";
    const std::string name = SysfsName(g.bus_id);
    const std::string link = UnderRoot(root, "/sys/bus/pci/devices/" + name);
    const fs::path dev = fs::canonical(link, ec);
    if (name.empty() || ec) {
      out.push_back({"acs",
                     CheckStatus::kWarn,
                     {g.index},
                     tag + (name.empty() ? "no PCI bus id" : name + " is not in sysfs") +
                         ": the PCIe bridges above it cannot be checked",
                     "lspci -vvv | grep ACSCtl shows ACS on every bridge"});
      continue;
    }
    std::vector<Bridge> bridges;
    for (fs::path p = dev.parent_path();
         p != top && p.has_filename() && IsPciAddress(p.filename().string());
         p = p.parent_path()) {
      bridges.push_back(ReadBridge(p));
    }
    std::string redirecting, bdfs, unreadable;
    for (const Bridge& b : bridges) {
      if (!b.readable) {
        unreadable += (unreadable.empty() ? "" : ", ") + b.bdf;
      } else if (b.has_acs && (b.acs_ctrl & kAcsRedirect) && b.port_type != kRootPort) {
        redirecting +=
            (redirecting.empty() ? "" : ", ") + b.bdf + " (" + AcsBits(b.acs_ctrl) + ")";
        bdfs += (bdfs.empty() ? "" : " ") + b.bdf;
      }
    }
    if (!redirecting.empty()) {
      // With NVLink up, GPU peers talk over NVLink; what still crosses the switch is
      // GPUDirect RDMA to a NIC beside the GPU.
      const bool nvlink = !g.links_up.empty();
      out.push_back(
          {"acs",
           nvlink ? CheckStatus::kWarn : CheckStatus::kFail,
           {g.index},
           tag + "ACS redirects peer-to-peer traffic on " + redirecting +
               ": forces P2P through the root complex" +
               (nvlink ? " (its GPU peers use NVLink; GPUDirect RDMA to a NIC under the "
                         "same switch is slowed)"
                       : ""),
           "disable ACS in the BIOS (PCIe ACS control), or clear it at each boot: setpci "
           "-s BRIDGE ECAP_ACS+0x6.w=0000 for " +
               bdfs +
               " (NCCL's troubleshooting guide); keep it only where the IOMMU must "
               "isolate devices for VMs"});
    } else if (!unreadable.empty()) {
      out.push_back({"acs",
                     CheckStatus::kWarn,
                     {g.index},
                     tag + "ACS unknown on " + unreadable +
                         ": their extended configuration space cannot be read (not root)",
                     "run hachi doctor as root"});
    } else {
      out.push_back(
          {"acs",
           CheckStatus::kOk,
           {g.index},
           tag + (bridges.empty() ? std::string("no PCIe bridge between it and the root "
                                                "complex")
                                  : "no ACS redirect on the switch ports above it"),
           ""});
    }
  }
  return out;
}

}  // namespace hachi::diag
