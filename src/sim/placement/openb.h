// The openb data model (Alibaba GPU trace 2023, as FGD's ATC'23 benchmark uses it):
// GPU nodes with CPU, memory and whole GPUs of one model; pods asking for CPU, memory
// and either a share of one GPU or whole GPUs, optionally of given models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace hachi::placement {

constexpr int kMilliPerGpu = 1000;
constexpr int kMaxGpusPerNode = 8;

struct OpenbNode {
  std::string sn;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  int model = 0;  // index into Cluster::models
};

struct OpenbPod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;       // per GPU
  uint32_t spec_mask = 0;  // allowed models (bits of Cluster::models); 0: any
  std::string gpu_spec;    // as written, for grouping typical tasks
  // Total GPU demand in milli.
  int64_t demand() const { return int64_t{num_gpu} * gpu_milli; }
  bool is_share() const { return num_gpu == 1 && gpu_milli < kMilliPerGpu; }
};

struct Cluster {
  std::vector<OpenbNode> nodes;
  std::vector<std::string> models;  // at most 31 (bit 31 of a mask: no model)
  int64_t total_gpu_milli() const;
};

// Parses a node list (`sn,cpu_milli,memory_mib,gpu,model`). `file` names the source in
// errors ("file:line: field: why").
Result<Cluster> ParseNodes(const std::string& text, const std::string& file);
// Parses a pod list (5 columns, or 6+ with gpu_spec); models in gpu_spec that no node
// has simply never match. Rejects multi-GPU pods with a share (< 1000 milli per GPU).
Result<std::vector<OpenbPod>> ParsePods(const std::string& text, const std::string& file,
                                        const Cluster& cluster);

// ${HACHI_SHARED_DIR:-<source dir>/../shared}/traces/alibaba-openb-gpu-v2023
std::string OpenbDir();
Result<Cluster> LoadNodes(const std::string& path);
Result<std::vector<OpenbPod>> LoadPods(const std::string& path, const Cluster& cluster);

}  // namespace hachi::placement
