// A fake node's files for `hachi doctor --root DIR` (test-only): /proc (hostname,
// meminfo, mounts, processes), /sys (the cgroup controllers, and for each GPU its PCI
// path up to a root port, each bridge with a binary `config`), /dev/kmsg as a plain file,
// and the syscall facts in DIR/hachi-host-facts.json. Healthy by default; the fields are
// the faults a test sets.
//
// Each GPU hangs below its own root port 0000:00:<01+i>.0 and a PCIe switch (upstream
// port 0000:<c0+2i>:00.0, downstream port 0000:<c1+2i>:00.0), as on an HGX board. The
// root ports redirect P2P (ACS control 0x1d, what Linux sets when an IOMMU is on), which
// doctor must not flag; the switch's downstream port carries `acs[gpu]` (default 0).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace hachi::diag::testing {

inline constexpr int kRootPort = 4, kSwitchUp = 5, kSwitchDown = 6;

// The configuration space of a PCIe port of `port_type`: a PCI Express capability at
// 0x40 and an ACS extended capability at 0x100 with control register `acs_ctrl`. 0x200
// bytes: what root reads of it matters (a user reads only 64).
inline std::string BridgeConfig(int port_type, uint16_t acs_ctrl) {
  std::string c(0x200, '\0');
  auto put16 = [&](size_t at, unsigned v) {
    c[at] = static_cast<char>(v & 0xFF);
    c[at + 1] = static_cast<char>((v >> 8) & 0xFF);
  };
  put16(0x00, 0x10B5);  // vendor: Broadcom/PLX
  put16(0x02, 0xC010);
  put16(0x06, 0x0010);  // status: a capability list
  c[0x0E] = 0x01;       // header type 1: a bridge
  c[0x34] = 0x40;       // first capability
  c[0x40] = 0x10;       // PCI Express, last in the list
  c[0x42] = static_cast<char>(0x02 | port_type << 4);
  put16(0x100, 0x000D);  // ACS, version 1, no next capability
  put16(0x102, 0x0001);
  put16(0x104, 0x005F);    // what it can do
  put16(0x106, acs_ctrl);  // what is on
  return c;
}

struct HostTree {
  std::string hostname = "node-a";
  std::vector<std::string> gpu_bus_ids;  // NVML form, "00000000:18:00.0"
  std::map<int, uint16_t> acs;           // GPU -> its switch port's ACS control
  bool fabric_manager = false;           // a process nv-fabricmanage(r)
  std::string kernel_log =               // /dev/kmsg's records since boot
      "6,1,0,-;Linux version 6.1.0-18-amd64\n"
      "6,812,4211873,-;nvidia: loading out-of-tree module taints kernel.\n"
      "6,840,5122011,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n";
  uint64_t mem_kb = 2113459340;  // 2 TiB, an HGX node's
  std::string facts =
      R"({"shm_bytes": 1082091118592, "memlock": "unlimited", "clock_synced": true})";
  std::string mounts =
      "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
      "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
      "tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0\n"
      "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n";
  std::string controllers = "cpuset cpu io memory hugetlb pids rdma misc";
  int64_t pid_max = 4194304;  // systemd's, on 64-bit machines
  int64_t threads_max = 16511545;

  void WriteTo(const std::string& root) const {
    namespace fs = std::filesystem;
    auto write = [&](const std::string& path, const std::string& text) {
      fs::create_directories(fs::path(root + path).parent_path());
      std::ofstream(root + path, std::ios::binary) << text;
    };
    write("/proc/sys/kernel/hostname", hostname + "\n");
    write("/proc/sys/kernel/pid_max", std::to_string(pid_max) + "\n");
    write("/proc/sys/kernel/threads-max", std::to_string(threads_max) + "\n");
    write("/proc/meminfo", "MemTotal:       " + std::to_string(mem_kb) +
                               " kB\nMemFree:        1000000 kB\n");
    write("/proc/mounts", mounts);
    write("/proc/1/comm", "systemd\n");
    write("/proc/812/comm", "nvidia-persiste\n");
    if (fabric_manager) write("/proc/901/comm", "nv-fabricmanage\n");
    write("/sys/fs/cgroup/cgroup.controllers", controllers + "\n");
    write("/dev/kmsg", kernel_log);
    write("/hachi-host-facts.json", facts + "\n");
    fs::create_directories(root + "/sys/bus/pci/devices");
    for (size_t i = 0; i < gpu_bus_ids.size(); ++i) {
      unsigned domain = 0, bus = 0, dev = 0, fn = 0;
      std::sscanf(gpu_bus_ids[i].c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
      const unsigned k = static_cast<unsigned>(i) & 0x1F;  // at most 32 GPUs
      char gpu[48], port[48], up[48], down[48];
      std::snprintf(gpu, sizeof(gpu), "%04x:%02x:%02x.%x", domain, bus, dev, fn);
      std::snprintf(port, sizeof(port), "0000:00:%02x.0", 1 + k);
      std::snprintf(up, sizeof(up), "0000:%02x:00.0", 0xC0 + 2 * k);
      std::snprintf(down, sizeof(down), "0000:%02x:00.0", 0xC1 + 2 * k);
      const std::string chain =
          std::string("/devices/pci0000:00/") + port + "/" + up + "/" + down;
      const auto a = acs.find(static_cast<int>(i));
      write("/sys" + chain + "/config",
            BridgeConfig(kSwitchDown, a == acs.end() ? 0 : a->second));
      write("/sys/devices/pci0000:00/" + std::string(port) + "/" + up + "/config",
            BridgeConfig(kSwitchUp, 0));
      write("/sys/devices/pci0000:00/" + std::string(port) + "/config",
            BridgeConfig(kRootPort, 0x001D));
      write("/sys" + chain + "/" + gpu + "/vendor", "0x10de\n");
      // Relative, as the kernel's: resolved inside the root.
      fs::create_symlink("../../.." + chain + "/" + gpu,
                         root + "/sys/bus/pci/devices/" + gpu);
    }
  }
};

}  // namespace hachi::diag::testing
