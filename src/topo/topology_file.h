// The Hachi topology file: a JSON description of one node's GPUs and links, for
// simulated nodes and tests (format documented in docs/topology-format.md).
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topo/topology.h"

namespace hachi::topo {

// The value of the file's "format" key; a file without it, or with another, is refused.
inline constexpr std::string_view kTopologyFormat = "hachi-topology/1";

// A whole topology file: the node plus the fields that describe it to people.
struct TopologyFile {
  std::string name;                // "hgx-h100"; may be empty
  std::string description;         // one line; may be empty
  std::vector<std::string> notes;  // facts about the layout and where they come from
  Topology topology;
};

// Parses a topology file's text. Errors name the JSON path of the bad field
// (e.g. "gpus[3].numa_node: expected an integer"). `origin` names the file in messages.
Result<Topology> ParseTopologyJson(std::string_view text, std::string_view origin);
// Writes `t` in the same format (stable key order; round-trips through the parser).
std::string TopologyToJson(const Topology& t);

// The same, keeping name, description and notes. The topology's source is set to
// "topology file <origin>".
Result<TopologyFile> ParseTopologyFile(std::string_view text, std::string_view origin);
std::string TopologyFileToJson(const TopologyFile& f);
// Reads and parses the file at `path`; kNotFound when it cannot be read.
Result<TopologyFile> ReadTopologyFile(const std::string& path);

}  // namespace hachi::topo
