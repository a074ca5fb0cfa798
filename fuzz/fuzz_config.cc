// libFuzzer target for the cluster policy file (config/cluster_config.h): TOML text in,
// a ClusterConfig or an error out, never a crash, hang or sanitizer report. What parses
// is then applied to a small cluster (n0001..n0006, as `hachi sim` names nodes), as
// the server and `hachi sim --config` do, and must hold the documented contract:
//   - an error names the file ("fuzz.toml:...");
//   - a failed apply leaves the cluster as it was (a broken config loses nothing);
//   - a successful one leaves every node's partition indices in range, every partition's
//     node indices in range, and names unique.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "config/cluster_config.h"
#include "fuzz_check.h"
#include "sim/cluster_spec.h"

namespace {

using namespace hachi;  // NOLINT: a fuzz target's one function

const sched::ClusterState& BaseCluster() {
  static const sched::ClusterState* base = [] {
    Result<sched::ClusterState> s = sim::BuildCluster("4x8:hgx-h100,2x8:pcie-8x-l40s");
    FUZZ_CHECK(s.ok(), s.status().ToString());
    return new sched::ClusterState(std::move(*s));
  }();
  return *base;
}

// What a failed apply must not have touched.
std::string Shape(const sched::ClusterState& s) {
  std::string out;
  for (const sched::Partition& p : s.partitions) {
    out += "p " + p.name + " " + std::to_string(p.nodes.size()) + " " +
           std::to_string(p.max_time) + ";";
  }
  for (const sched::Qos& q : s.qos) out += "q " + q.name + ";";
  for (const sched::Node& n : s.nodes) {
    out += "n " + n.name + " " + n.block;
    for (int p : n.partitions) out += " " + std::to_string(p);
    out += ";";
  }
  return out;
}

void CheckApplied(const sched::ClusterState& s) {
  const int parts = static_cast<int>(s.partitions.size());
  const int nodes = static_cast<int>(s.nodes.size());
  std::set<std::string> names;
  for (const sched::Partition& p : s.partitions) {
    FUZZ_CHECK(names.insert(p.name).second, "partition " + p.name + " twice");
    for (int n : p.nodes) FUZZ_CHECK(n >= 0 && n < nodes, p.name);
  }
  for (const sched::Node& n : s.nodes) {
    for (int p : n.partitions) FUZZ_CHECK(p >= 0 && p < parts, n.name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<config::ClusterConfig> c = config::ParseClusterConfig(text, "fuzz.toml");
  if (!c.ok()) {
    FUZZ_CHECK(c.status().code() == StatusCode::kInvalidArgument, c.status().ToString());
    FUZZ_CHECK(c.status().message().find("fuzz.toml") != std::string::npos,
               c.status().ToString());
    return 0;
  }
  const sched::ClusterState& base = BaseCluster();
  const std::string before = Shape(base);
  for (bool allow_empty : {false, true}) {
    sched::ClusterState state = base;
    const Status st = config::ApplyClusterConfig(*c, &state, allow_empty);
    if (st.ok()) {
      CheckApplied(state);
    } else {
      FUZZ_CHECK(Shape(state) == before,
                 "a failed apply changed the cluster: " + st.ToString());
    }
  }
  return 0;
}
