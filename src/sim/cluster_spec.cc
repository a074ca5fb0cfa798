#include "sim/cluster_spec.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "alloc/node_model.h"
#include "core/cpulist.h"
#include "core/strings.h"
#include "topo/analysis.h"
#include "topo/presets.h"

namespace hachi::sim {
namespace {

constexpr int64_t kGiB = 1024;  // in MiB

// Host memory of the servers the presets describe (vendor data sheets: DGX H100 and
// DGX A100 640GB ship 2 TiB, DGX-1 512 GiB, DGX-2 1.5 TiB). Presets not listed get
// 128 GiB per GPU. CPUs come from the presets' GPU affinity (every hardware thread).
int64_t PresetMemoryMib(std::string_view preset) {
  static const std::map<std::string, int64_t, std::less<>> kMemory = {
      {"hgx-h100", 2048 * kGiB},     {"dgx-a100", 2048 * kGiB},
      {"a800", 1024 * kGiB},         {"dgx1-v100", 512 * kGiB},
      {"hgx2-16", 1536 * kGiB},      {"pcie-8x-4090-nv4-pairs", 512 * kGiB},
      {"pcie-8x-l40s", 1024 * kGiB},
  };
  auto it = kMemory.find(preset);
  return it == kMemory.end() ? 0 : it->second;
}

// Highest CPU in any GPU's affinity + 1: the presets list every hardware thread.
int CpusFromAffinity(const topo::Topology& t) {
  int cpus = 0;
  for (const topo::Gpu& g : t.gpus()) {
    Result<std::vector<int>> list = ParseCpuList(g.cpu_affinity);
    if (list.ok() && !list->empty()) cpus = std::max(cpus, list->back() + 1);
  }
  return cpus;
}

// One kind of server: its compiled model (shared by all its nodes) and host facts.
struct NodeKind {
  std::shared_ptr<const alloc::NodeModel> model;
  topo::InterconnectClass interconnect = topo::InterconnectClass::kUnknown;
  std::string gpu_model;
  int64_t gpu_memory_mib = 0;
  int cpus = 0;
  int64_t memory_mib = 0;
};

Result<NodeKind> MakeKind(const topo::Topology& t, int cpus, int64_t memory_mib) {
  Result<alloc::NodeModel> model = alloc::NodeModel::Compile(t);
  if (!model.ok()) return model.status();
  NodeKind k;
  k.model = std::make_shared<const alloc::NodeModel>(std::move(*model));
  k.interconnect = topo::Analyze(t).interconnect;
  k.gpu_model = t.gpu_count() > 0 ? t.gpu(0).model : "";
  k.gpu_memory_mib = t.gpu_count() > 0 ? t.gpu(0).memory_mib : 0;
  k.cpus = cpus;
  k.memory_mib = memory_mib;
  return k;
}

// Appends `count` idle nodes of `kind`, starting a new network block (a different
// server type sits behind its own leaf switches).
void AddNodes(const NodeKind& kind, int count, sched::ClusterState* state) {
  int first_block = 1;
  if (!state->nodes.empty()) {
    first_block = std::atoi(state->nodes.back().block.c_str() + 1) + 1;
  }
  for (int i = 0; i < count; ++i) {
    sched::Node n;
    char name[32];
    std::snprintf(name, sizeof name, "n%04zu", state->nodes.size() + 1);
    n.name = name;
    char block[16];
    std::snprintf(block, sizeof block, "b%02d", first_block + i / kNodesPerBlock);
    n.block = block;
    n.model = kind.model;
    n.interconnect = kind.interconnect;
    n.gpu_model = kind.gpu_model;
    n.gpu_memory_mib = kind.gpu_memory_mib;
    n.cpus = kind.cpus;
    n.memory_mib = kind.memory_mib;
    n.partitions = {0};
    n.free_gpus = kind.model->all_gpus();
    n.free_cpus = kind.cpus;
    n.free_memory_mib = kind.memory_mib;
    state->nodes.push_back(std::move(n));
  }
}

// A 2-GPU PCIe server as in Philly's machine list: both GPUs behind the CPU's host
// bridge (PHB), one NUMA node. The machine list gives only the GPU count and memory.
topo::Topology TwoGpuPcieTopology(const std::string& gpu_model, int64_t gpu_memory_mib) {
  topo::Topology t(2);
  t.set_source("philly 2-GPU PCIe node (built in)");
  t.SetSymmetricLink(0, 1, topo::Link{0, topo::PciePath::kPhb});
  for (int i = 0; i < 2; ++i) {
    topo::Gpu& g = t.mutable_gpu(i);
    g.model = gpu_model;
    g.memory_mib = gpu_memory_mib;
    g.numa_node = 0;
    g.cpu_affinity = "0-23";
  }
  return t;
}

// Philly's 8- and 2-GPU machines (cluster_machine_list.csv: machineId, GPUs, memory).
// The list names no GPU model, CPUs or host memory: the 8-GPU servers take the
// PCIe-only layout of the pcie-8x-l40s preset, and the host figures are assumptions
// (48 CPUs / 256 GiB and 24 CPUs / 128 GiB) that count-only traces never touch.
// `path` names the list in messages.
Status AddPhillyNodes(std::string_view text, const std::string& path,
                      sched::ClusterState* state) {
  int count8 = 0, count2 = 0;
  std::vector<std::string_view> lines = SplitLines(text);
  for (size_t i = 1; i < lines.size(); ++i) {
    if (Trim(lines[i]).empty()) continue;
    std::vector<std::string_view> f = Split(lines[i], ',');
    std::optional<long long> gpus = f.size() == 3 ? ParseInt(Trim(f[1])) : std::nullopt;
    if (!gpus || (*gpus != 8 && *gpus != 2)) {
      return InvalidArgument(path + ":" + std::to_string(i + 1) +
                             ": number of GPUs: expected 8 or 2 in 'machineId, number "
                             "of GPUs, single GPU mem'");
    }
    (*gpus == 8 ? count8 : count2)++;
    if (count8 + count2 > kMaxClusterNodes) {
      return InvalidArgument(path + ": more than " + std::to_string(kMaxClusterNodes) +
                             " machines");
    }
  }
  Result<topo::Topology> eight = topo::LoadPreset("pcie-8x-l40s");
  if (!eight.ok()) return eight.status();
  for (topo::Gpu& g : eight->mutable_gpus()) {
    g.model = "Philly GPU 24GB";
    g.memory_mib = 24 * kGiB;
  }
  Result<NodeKind> kind8 = MakeKind(*eight, 48, 256 * kGiB);
  if (!kind8.ok()) return kind8.status();
  Result<NodeKind> kind2 =
      MakeKind(TwoGpuPcieTopology("Philly GPU 12GB", 12 * kGiB), 24, 128 * kGiB);
  if (!kind2.ok()) return kind2.status();
  AddNodes(*kind8, count8, state);
  AddNodes(*kind2, count2, state);
  return Status::Ok();
}

Status AddPresetItem(std::string_view item, std::map<std::string, NodeKind>* kinds,
                     sched::ClusterState* state) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("cluster spec item '" + std::string(item) + "': " + why);
  };
  size_t x = item.find('x'), colon = item.find(':');
  if (x == std::string_view::npos || colon == std::string_view::npos || x > colon) {
    return bad("expected COUNTxGPUS:PRESET, e.g. 96x8:hgx-h100");
  }
  std::optional<long long> count = ParseInt(Trim(item.substr(0, x)));
  std::optional<long long> gpus = ParseInt(Trim(item.substr(x + 1, colon - x - 1)));
  std::string preset(Trim(item.substr(colon + 1)));
  if (!count || *count < 1 || *count > kMaxClusterNodes) {
    return bad("node count must be 1.." + std::to_string(kMaxClusterNodes));
  }
  // Items add up: "100000x8:hgx-h100,100000x8:..." would build millions of nodes.
  if (state->nodes.size() + static_cast<size_t>(*count) >
      static_cast<size_t>(kMaxClusterNodes)) {
    return bad("more than " + std::to_string(kMaxClusterNodes) + " nodes in all");
  }
  if (!gpus || *gpus < 1) return bad("GPUs per node must be a positive number");
  auto it = kinds->find(preset);
  if (it == kinds->end()) {
    Result<topo::Topology> t = topo::LoadPreset(preset);
    if (!t.ok())
      return Status(t.status().code(), "cluster spec item '" + std::string(item) +
                                           "': " + t.status().message());
    int64_t memory = PresetMemoryMib(preset);
    if (memory == 0) memory = 128 * kGiB * t->gpu_count();
    Result<NodeKind> kind = MakeKind(*t, CpusFromAffinity(*t), memory);
    if (!kind.ok()) return bad(kind.status().message());
    it = kinds->emplace(preset, std::move(*kind)).first;
  }
  if (it->second.model->gpu_count() != *gpus) {
    return bad("preset " + preset + " has " +
               std::to_string(it->second.model->gpu_count()) + " GPUs, not " +
               std::to_string(*gpus));
  }
  AddNodes(it->second, static_cast<int>(*count), state);
  return Status::Ok();
}

}  // namespace

std::string DefaultSharedDir() {
  if (const char* env = std::getenv("HACHI_SHARED_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return std::string(HACHI_SOURCE_DIR) + "/../shared";
}

Result<sched::ClusterState> BuildCluster(std::string_view spec,
                                         const ClusterOptions& options) {
  sched::ClusterState state;
  spec = Trim(spec);
  if (spec.empty()) return InvalidArgument("empty cluster spec (e.g. 96x8:hgx-h100)");
  if (spec == "philly" && !options.philly_machine_list_text.empty()) {
    HACHI_RETURN_IF_ERROR(
        AddPhillyNodes(options.philly_machine_list_text, "philly", &state));
  } else if (spec == "philly") {
    std::string path = options.philly_machine_list;
    if (path.empty()) {
      path = (options.shared_dir.empty() ? DefaultSharedDir() : options.shared_dir) +
             "/traces/philly-atc19/cluster_machine_list.csv";
    }
    std::string error;
    std::optional<std::string> text = ReadFile(path, &error);
    if (!text) return NotFound("cluster 'philly': " + error);
    HACHI_RETURN_IF_ERROR(AddPhillyNodes(*text, path, &state));
  } else {
    std::map<std::string, NodeKind> kinds;
    for (std::string_view item : Split(spec, ',')) {
      HACHI_RETURN_IF_ERROR(AddPresetItem(Trim(item), &kinds, &state));
    }
  }
  sched::Partition p;
  p.name = "default";
  p.mode = sched::PartitionMode::kShared;
  p.default_time = 4 * kHour;
  p.max_time = 90 * kDay;  // the longest usual limit (time_limits.h)
  p.nodes.reserve(state.nodes.size());
  for (size_t i = 0; i < state.nodes.size(); ++i) p.nodes.push_back(static_cast<int>(i));
  state.partitions.push_back(std::move(p));
  return state;
}

int TotalGpus(const sched::ClusterState& state) {
  int total = 0;
  for (const sched::Node& n : state.nodes) total += n.gpu_count();
  return total;
}

}  // namespace hachi::sim
