// Test helpers for topologies (test targets only; needs GoogleTest).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "topo/topology.h"

namespace hachi::topo {

// Equal GPUs (every field), links (both directions) and NICs; names the first
// difference. Source and read findings are not compared.
inline ::testing::AssertionResult SameTopology(const Topology& a, const Topology& b) {
  if (a.gpu_count() != b.gpu_count()) {
    return ::testing::AssertionFailure()
           << "GPU count " << a.gpu_count() << " vs " << b.gpu_count();
  }
  for (int i = 0; i < a.gpu_count(); ++i) {
    const Gpu &x = a.gpu(i), &y = b.gpu(i);
    auto diff = [&](const char* field, const std::string& u, const std::string& v) {
      return ::testing::AssertionFailure()
             << "gpu " << i << " " << field << ": '" << u << "' vs '" << v << "'";
    };
    if (x.index != y.index)
      return diff("index", std::to_string(x.index), std::to_string(y.index));
    if (x.uuid != y.uuid) return diff("uuid", x.uuid, y.uuid);
    if (x.model != y.model) return diff("model", x.model, y.model);
    if (x.memory_mib != y.memory_mib) {
      return diff("memory_mib", std::to_string(x.memory_mib),
                  std::to_string(y.memory_mib));
    }
    if (x.pci_bus_id != y.pci_bus_id)
      return diff("pci_bus_id", x.pci_bus_id, y.pci_bus_id);
    if (x.numa_node != y.numa_node) {
      return diff("numa_node", std::to_string(x.numa_node), std::to_string(y.numa_node));
    }
    if (x.cpu_affinity != y.cpu_affinity) {
      return diff("cpu_affinity", x.cpu_affinity, y.cpu_affinity);
    }
    if (x.mig_enabled != y.mig_enabled) {
      return diff("mig_enabled", x.mig_enabled ? "on" : "off",
                  y.mig_enabled ? "on" : "off");
    }
    if (x.mig_devices != y.mig_devices) {
      return diff("mig_devices", MigLayoutText(x.mig_devices),
                  MigLayoutText(y.mig_devices));
    }
    for (int j = 0; j < a.gpu_count(); ++j) {
      if (i == j || a.link(i, j) == b.link(i, j)) continue;
      return ::testing::AssertionFailure()
             << "link " << i << "-" << j << ": " << a.link(i, j).Label() << "/"
             << PciePathName(a.link(i, j).pcie) << " vs " << b.link(i, j).Label() << "/"
             << PciePathName(b.link(i, j).pcie);
    }
  }
  if (a.nics().size() != b.nics().size()) {
    return ::testing::AssertionFailure()
           << "NIC count " << a.nics().size() << " vs " << b.nics().size();
  }
  for (size_t k = 0; k < a.nics().size(); ++k) {
    const Nic &x = a.nics()[k], &y = b.nics()[k];
    if (x.name != y.name || x.device != y.device || x.gpu_paths != y.gpu_paths) {
      return ::testing::AssertionFailure()
             << "NIC " << k << " (" << x.name << ") differs";
    }
  }
  return ::testing::AssertionSuccess();
}

// A temporary folder, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "hachi-nvml-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::string path_;
};

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      unsetenv(name_);
    else
      setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

}  // namespace hachi::topo
