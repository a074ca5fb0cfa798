// Readers for `nvidia-smi` text: the topology matrix (`topo -m`), the GPU list (`-L`)
// and the CSV of `--query-gpu=index,uuid,name,memory.total,pci.bus_id
// --format=csv,noheader,nounits`; and merging them into one Topology.
//
// The matrix reader works from the format, not from known servers: columns are mapped
// by header name, tabs or spaces both work (spaces are taken as expanded 8-column tab
// stops), NIC columns may be named anything, the attribute columns (CPU Affinity,
// NUMA Affinity, GPU NUMA ID, ...) may be present or not, legends may be cut short.
// Problems in the text become findings on the Topology that name the row and column;
// only text with no matrix at all is an error. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topo/topology.h"

namespace hachi::topo {

// `nvidia-smi topo -m` output. `origin` (a file name, "nvidia-smi") prefixes messages.
Result<Topology> ParseTopoMatrix(std::string_view text, std::string_view origin);

struct ListedGpu {
  int index = 0;
  std::string model;  // "NVIDIA H100 80GB HBM3"
  std::string uuid;   // "GPU-…"
  // The MIG devices listed under it: profile and UUID (the instance ids too from the
  // UUIDs of drivers before R470, "MIG-GPU-<uuid>/<gi>/<ci>").
  std::vector<MigDevice> mig_devices;
};
// `nvidia-smi -L` output. A MIG device's line:
// "  MIG 3g.40gb     Device  0: (UUID: MIG-d771d938-b556-4f9d-b742-2dd26b864023)".
Result<std::vector<ListedGpu>> ParseGpuList(std::string_view text,
                                            std::string_view origin);

struct QueriedGpu {
  int index = -1;
  std::string uuid, model, pci_bus_id;  // empty when the query did not ask for them
  int64_t memory_mib = 0;
};
// `nvidia-smi --query-gpu=...` CSV, with or without a header line, with or without units
// ("81920" or "81920 MiB"). Columns are taken from the header when there is one, else
// from `fields` (the --query-gpu list, default index,uuid,name,memory.total,pci.bus_id).
Result<std::vector<QueriedGpu>> ParseQueryGpuCsv(
    std::string_view text, std::string_view origin,
    std::string_view fields = "index,uuid,name,memory.total,pci.bus_id");

// Adds names/UUIDs (and memory, bus ids) to `t`, by GPU index. A GPU count that differs
// from the matrix, or a UUID/name that conflicts with one already there, is a finding.
// A GPU with MIG devices listed is in MIG mode with those devices (`-L` lists none for
// a GPU in MIG mode without instances, so that one reads as MIG off).
void MergeGpuList(Topology& t, const std::vector<ListedGpu>& gpus,
                  std::string_view origin);
void MergeQueriedGpus(Topology& t, const std::vector<QueriedGpu>& gpus,
                      std::string_view origin);

}  // namespace hachi::topo
