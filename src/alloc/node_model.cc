#include "alloc/node_model.h"

#include <string>

#include "alloc/link_score.h"

namespace hachi::alloc {
namespace {

// FNV-1a over 64-bit words, then a final avalanche (splitmix64), so that small
// layout differences spread over all bits of the key.
class Hasher {
 public:
  void Add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h_ ^= (v >> (8 * i)) & 0xff;
      h_ *= 0x100000001b3ULL;
    }
  }
  uint64_t Finish() const {
    uint64_t z = h_ + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

bool SharesSwitch(topo::PciePath p) {
  return p == topo::PciePath::kPix || p == topo::PciePath::kPxb;
}

}  // namespace

Result<NodeModel> NodeModel::Compile(const topo::Topology& t) {
  const int n = t.gpu_count();
  if (n < 1 || n > kMaxGpus) {
    return InvalidArgument("the allocator handles 1 to " + std::to_string(kMaxGpus) +
                           " GPUs per node; this node has " + std::to_string(n));
  }
  NodeModel m;
  m.n_ = n;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const topo::Link& ab = t.link(a, b);
      const topo::Link& ba = t.link(b, a);
      const bool use_ab = LinkScore(ab) >= LinkScore(ba);
      const topo::Link& best = use_ab ? ab : ba;
      m.link_[a * kMaxGpus + b] = best;
      m.score_[a * kMaxGpus + b] = static_cast<int16_t>(LinkScore(best));
    }
  }
  for (int i = 0; i < n; ++i) m.numa_[i] = t.gpu(i).numa_node;

  // PCIe groups: union of PIX/PXB pairs among GPUs whose PCIe relations are all known.
  // Either direction counts: the better one for the pcie path too.
  std::array<bool, kMaxGpus> known{};
  for (int a = 0; a < n; ++a) {
    known[a] = true;
    for (int b = 0; b < n; ++b) {
      if (a != b && t.link(a, b).pcie == topo::PciePath::kUnknown &&
          t.link(b, a).pcie == topo::PciePath::kUnknown) {
        known[a] = false;
      }
    }
  }
  m.pcie_group_.fill(-1);
  int groups = 0;
  for (int a = 0; a < n; ++a) {
    if (!known[a] || m.pcie_group_[a] >= 0) continue;
    // Flood fill from a over switch-sharing links.
    const int g = groups++;
    int stack[kMaxGpus];
    int top = 0;
    stack[top++] = a;
    m.pcie_group_[a] = g;
    while (top > 0) {
      const int u = stack[--top];
      for (int v = 0; v < n; ++v) {
        if (v == u || !known[v] || m.pcie_group_[v] >= 0) continue;
        if (SharesSwitch(t.link(u, v).pcie) || SharesSwitch(t.link(v, u).pcie)) {
          m.pcie_group_[v] = g;
          stack[top++] = v;
        }
      }
    }
  }

  Hasher h;
  h.Add(static_cast<uint64_t>(n));
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) h.Add(static_cast<uint64_t>(m.score(a, b)));
  }
  // NUMA: relabel by first appearance (unknown stays apart) so numbering is irrelevant.
  std::array<int, kMaxGpus> label{};
  for (int i = 0; i < n; ++i) {
    label[i] = -1;
    if (m.numa_[i] < 0) continue;
    for (int j = 0; j <= i; ++j) {
      if (m.numa_[j] == m.numa_[i]) {
        label[i] = j;
        break;
      }
    }
  }
  for (int i = 0; i < n; ++i) h.Add(static_cast<uint64_t>(label[i] + 1));
  for (int i = 0; i < n; ++i) h.Add(static_cast<uint64_t>(m.pcie_group_[i] + 1));
  m.key_ = h.Finish();
  return m;
}

}  // namespace hachi::alloc
