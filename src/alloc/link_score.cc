#include "alloc/link_score.h"

namespace hachi::alloc {

int LinkScore(const topo::Link& link) {
  if (link.nvlinks > 0) return 10 + 10 * link.nvlinks;
  switch (link.pcie) {
    case topo::PciePath::kSys:
      return 1;
    case topo::PciePath::kNode:
      return 2;
    case topo::PciePath::kPhb:
      return 3;
    case topo::PciePath::kPxb:
      return 4;
    case topo::PciePath::kPix:
      return 5;
    case topo::PciePath::kUnknown:
      break;
  }
  return kUnknownLinkScore;
}

}  // namespace hachi::alloc
