// How `hachi topo` shows a node: a text report readable at a glance, and one JSON
// object with the same content. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "alloc/choice.h"
#include "topo/analysis.h"
#include "topo/topology.h"

namespace hachi::cli {

std::string RenderTopologyText(const topo::Topology& t, const topo::TopologyFacts& facts,
                               const std::vector<topo::Finding>& findings);
// {"source","fingerprint","class","gpus":[...],"links":[[...]],"pcie":[[...]],
//  "nics":[...],"numa_groups":[...],"pcie_groups":[...],"nvlink_groups":[...],
//  "findings":[...],"status"}
std::string RenderTopologyJson(const topo::Topology& t, const topo::TopologyFacts& facts,
                               const std::vector<topo::Finding>& findings);

std::string RenderFindingsText(const std::vector<topo::Finding>& findings);
std::string RenderCheckJson(const topo::Topology& t,
                            const std::vector<topo::Finding>& findings);

struct AllocReport {
  std::string policy;
  GpuSet free;
  alloc::Request request;
  alloc::Choice choice;
};
std::string RenderAllocText(const topo::Topology& t, const AllocReport& r);
// {"policy","count","free":[...],"required":[...],"gpus":[...],"score":{...},
//  "explanation","cuda_visible_devices"}
std::string RenderAllocJson(const AllocReport& r);

}  // namespace hachi::cli
