#include "diag/link_facts.h"

#include <initializer_list>
#include <string>

#include "topo/nvml_api.h"

namespace hachi::diag {
namespace {

// NVLink generation from nvmlNvlinkVersion_t (1.0, 2.0, 2.2, 3.0, 3.1, 4.0, 5.0).
int GenerationOfNvmlVersion(unsigned v) {
  switch (v) {
    case topo::nvml::kNvLinkVersion1_0:
      return 1;
    case topo::nvml::kNvLinkVersion2_0:
    case topo::nvml::kNvLinkVersion2_2:
      return 2;
    case topo::nvml::kNvLinkVersion3_0:
    case topo::nvml::kNvLinkVersion3_1:
      return 3;
    case topo::nvml::kNvLinkVersion4_0:
      return 4;
    case topo::nvml::kNvLinkVersion5_0:
      return 5;
    default:
      return 0;
  }
}

bool Has(const std::string& model, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (model.find(n) != std::string::npos) return true;
  }
  return false;
}

// The NVLink generation a GPU model is built with; 0 when the model is not known.
// Preferred to NVML's answer: some drivers report NVLink 5.0 for Hopper GPUs, which would
// double the expected bandwidth (pynvml carries the same workaround).
int GenerationOfModel(const std::string& model) {
  if (Has(model, {"B100", "B200", "GB200", "B300"})) return 5;
  if (Has(model, {"H100", "H200", "H800", "GH200", "H20"})) return 4;
  if (Has(model, {"A100", "A800", "A30"})) return 3;
  if (Has(model, {"V100"})) return 2;
  if (Has(model, {"P100"})) return 1;
  return 0;
}

int ReadUint(topo::nvml::DeviceGetUintFn* fn, topo::nvml::Device dev) {
  unsigned v = 0;
  if (!fn || fn(dev, &v) != topo::nvml::kSuccess || v > 64) return 0;
  return static_cast<int>(v);
}

}  // namespace

double NvLinkGbps(int version) {
  switch (version) {
    case 1:
      return 20;
    case 2:
    case 3:
    case 4:
      return 25;
    case 5:
      return 50;
    default:
      return 0;
  }
}

double PcieGbps(int gen, int width) {
  if (gen <= 0 || width <= 0) return 0;
  // Transfer rate per lane in GT/s, and the share of it that is data.
  double gts = 0, coding = 0;
  switch (gen) {
    case 1:
      gts = 2.5, coding = 0.8;
      break;
    case 2:
      gts = 5, coding = 0.8;
      break;
    case 3:
      gts = 8, coding = 128.0 / 130;
      break;
    case 4:
      gts = 16, coding = 128.0 / 130;
      break;
    case 5:
      gts = 32, coding = 128.0 / 130;
      break;
    case 6:
      gts = 64, coding = 242.0 / 256;
      break;
    default:
      return 0;
  }
  return gts * coding * width / 8;  // bits per lane -> bytes over all lanes
}

Result<LinkFacts> ProbeLinkFacts(const topo::NvmlApi& nvml,
                                 const topo::Topology& topology) {
  namespace nv = topo::nvml;
  LinkFacts facts;
  facts.topology = topology;
  for (int i = 0; i < topology.gpu_count(); ++i) {
    GpuLinkFacts g;
    g.index = i;
    nv::Device dev = nullptr;
    nv::Return rc = nvml.get_handle(static_cast<unsigned>(i), &dev);
    if (rc != nv::kSuccess) {
      facts.gpus.push_back(g);  // a lost GPU: nothing known, which the caller shows
      continue;
    }
    g.pcie.gen = ReadUint(nvml.get_pcie_gen, dev);
    g.pcie.width = ReadUint(nvml.get_pcie_width, dev);
    g.pcie.max_gen = ReadUint(nvml.get_pcie_max_gen, dev);
    g.pcie.max_width = ReadUint(nvml.get_pcie_max_width, dev);
    int nvml_generation = 0;
    for (unsigned link = 0; link < nv::kNvLinkMaxLinks; ++link) {
      nv::EnableState active = nv::kFeatureDisabled;
      if (!nvml.get_nvlink_state ||
          nvml.get_nvlink_state(dev, link, &active) != nv::kSuccess ||
          active != nv::kFeatureEnabled) {
        continue;
      }
      ++g.nvlinks_up;
      unsigned v = 0;
      if (nvml_generation == 0 && nvml.get_nvlink_version &&
          nvml.get_nvlink_version(dev, link, &v) == nv::kSuccess) {
        nvml_generation = GenerationOfNvmlVersion(v);
      }
    }
    if (g.nvlinks_up > 0) {
      const int by_model = GenerationOfModel(topology.gpu(i).model);
      g.nvlink_version = by_model > 0 ? by_model : nvml_generation;
    }
    facts.gpus.push_back(g);
  }
  return facts;
}

}  // namespace hachi::diag
