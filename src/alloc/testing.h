// Fluent builders of hand-made topologies for the allocator's tests and benchmarks,
// so a case fits on a line:
//
//   TopoBuilder(8).NvSwitch(18).Numa({0, 0, 0, 0, 1, 1, 1, 1}).Model()
//   TopoBuilder(8).PcieSockets(2, 2).Pairs(4).Model()
//   TopoBuilder::Dgx1().Model()
//
// Test-only code: it aborts on a malformed matrix instead of returning a Status.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "alloc/node_model.h"
#include "core/strings.h"
#include "topo/topology.h"

namespace hachi::alloc::testing {

class TopoBuilder {
 public:
  explicit TopoBuilder(int n) : t_(n) {}

  // Every pair NV<links> (NVSwitch all-to-all); PCIe relations left as they are.
  TopoBuilder& NvSwitch(int links) {
    for (int a = 0; a < n(); ++a) {
      for (int b = 0; b < n(); ++b) {
        if (a != b) SetNv(a, b, links);
      }
    }
    return *this;
  }
  // NVLink bridges joining (0,1), (2,3), ...; PCIe relations left as they are.
  TopoBuilder& Pairs(int links) {
    for (int a = 0; a + 1 < n(); a += 2) {
      SetNv(a, a + 1, links);
      SetNv(a + 1, a, links);
    }
    return *this;
  }
  // A PCIe box: `sockets` equal NUMA nodes, each with `switches` equal PCIe switches.
  // PIX within a switch, NODE across switches of a socket, SYS across sockets. Sets
  // the NUMA node of every GPU to its socket.
  TopoBuilder& PcieSockets(int sockets, int switches) {
    const int per_socket = n() / sockets;
    const int per_switch = per_socket / switches;
    for (int a = 0; a < n(); ++a) {
      t_.mutable_gpu(a).numa_node = a / per_socket;
      for (int b = 0; b < n(); ++b) {
        if (a == b) continue;
        topo::PciePath p = topo::PciePath::kSys;
        if (a / per_switch == b / per_switch) {
          p = topo::PciePath::kPix;
        } else if (a / per_socket == b / per_socket) {
          p = topo::PciePath::kNode;
        }
        SetPcie(a, b, p);
      }
    }
    return *this;
  }
  TopoBuilder& Numa(const std::vector<int>& ids) {
    for (int i = 0; i < n() && i < static_cast<int>(ids.size()); ++i) {
      t_.mutable_gpu(i).numa_node = ids[i];
    }
    return *this;
  }
  // One symmetric link from an nvidia-smi cell: "NV2", "PIX", "SYS", ...
  TopoBuilder& Link(int a, int b, std::string_view cell) {
    t_.SetSymmetricLink(a, b, Parse(cell));
    return *this;
  }
  // One direction only (for asymmetric-matrix cases).
  TopoBuilder& OneWay(int a, int b, std::string_view cell) {
    t_.SetLink(a, b, Parse(cell));
    return *this;
  }
  // The GPU x GPU block of `nvidia-smi topo -m`: one row per GPU, cells separated by
  // spaces or tabs, "X" on the diagonal, row and column headers left out.
  TopoBuilder& Matrix(std::string_view rows) {
    int a = 0;
    for (std::string_view line : SplitLines(rows)) {
      if (Trim(line).empty()) continue;
      int b = 0;
      std::string cell;
      for (char ch : std::string(line) + " ") {
        if (ch != ' ' && ch != '\t') {
          cell += ch;
          continue;
        }
        if (cell.empty()) continue;
        if (cell != "X") t_.SetLink(a, b, Parse(cell));
        ++b;
        cell.clear();
      }
      ++a;
    }
    return *this;
  }

  // DGX-1 (V100) hybrid cube-mesh, copied from
  // shared/fixtures/nvidia-smi/topo-dgx1-v100-microway.txt; NUMA 0 = GPUs 0-3.
  static TopoBuilder Dgx1() {
    TopoBuilder b(8);
    b.Matrix(
        "X   NV1 NV1 NV2 NV2 SYS SYS SYS\n"
        "NV1 X   NV2 NV1 SYS NV2 SYS SYS\n"
        "NV1 NV2 X   NV2 SYS SYS NV1 SYS\n"
        "NV2 NV1 NV2 X   SYS SYS SYS NV1\n"
        "NV2 SYS SYS SYS X   NV1 NV1 NV2\n"
        "SYS NV2 SYS SYS NV1 X   NV2 NV1\n"
        "SYS SYS NV1 SYS NV1 NV2 X   NV2\n"
        "SYS SYS SYS NV1 NV2 NV1 NV2 X  \n");
    b.Numa({0, 0, 0, 0, 1, 1, 1, 1});
    return b;
  }

  const topo::Topology& Build() const { return t_; }
  NodeModel Model() const {
    Result<NodeModel> m = NodeModel::Compile(t_);
    if (!m.ok()) Die(m.status().ToString());
    return *m;
  }

 private:
  int n() const { return t_.gpu_count(); }
  void SetNv(int a, int b, int links) {
    topo::Link l = t_.link(a, b);
    l.nvlinks = links;
    t_.SetLink(a, b, l);
  }
  void SetPcie(int a, int b, topo::PciePath p) {
    topo::Link l = t_.link(a, b);
    l.pcie = p;
    t_.SetLink(a, b, l);
  }
  static topo::Link Parse(std::string_view cell) {
    bool self = false;
    Result<topo::Link> l = topo::ParseLinkCell(cell, &self);
    if (!l.ok()) Die(l.status().ToString());
    return *l;
  }
  [[noreturn]] static void Die(const std::string& why) {
    std::fprintf(stderr, "TopoBuilder: %s\n", why.c_str());
    std::abort();
  }

  topo::Topology t_;
};

// The hand-built layouts the tests and benchmarks share, by name.
//   nvswitch8   8 x NV18 all-to-all, NUMA 0-3 | 4-7 (HGX H100-like)
//   nvswitch16  16 x NV12 all-to-all, NUMA 0-7 | 8-15
//   pairs8      NV4 bridges (0,1) (2,3) (4,5) (6,7) on a 2-socket, 2-switch PCIe box
//   pcie8       2 sockets x 2 PCIe switches x 2 GPUs: PIX / NODE / SYS
//   dgx1        DGX-1 V100 hybrid cube-mesh (NV1 / NV2 / SYS)
inline NodeModel NamedModel(std::string_view name) {
  if (name == "nvswitch8")
    return TopoBuilder(8).NvSwitch(18).Numa({0, 0, 0, 0, 1, 1, 1, 1}).Model();
  if (name == "nvswitch16") {
    return TopoBuilder(16)
        .NvSwitch(12)
        .Numa({0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1})
        .Model();
  }
  if (name == "pairs8") return TopoBuilder(8).PcieSockets(2, 2).Pairs(4).Model();
  if (name == "pcie8") return TopoBuilder(8).PcieSockets(2, 2).Model();
  if (name == "dgx1") return TopoBuilder::Dgx1().Model();
  std::fprintf(stderr, "NamedModel: no layout '%s'\n", std::string(name).c_str());
  std::abort();
}
inline std::vector<std::string_view> NamedModels() {
  return {"nvswitch8", "nvswitch16", "pairs8", "pcie8", "dgx1"};
}

}  // namespace hachi::alloc::testing
