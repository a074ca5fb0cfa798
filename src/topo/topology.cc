#include "topo/topology.h"

#include "core/strings.h"

namespace hachi::topo {

std::string_view PciePathName(PciePath p) {
  switch (p) {
    case PciePath::kSys:
      return "SYS";
    case PciePath::kNode:
      return "NODE";
    case PciePath::kPhb:
      return "PHB";
    case PciePath::kPxb:
      return "PXB";
    case PciePath::kPix:
      return "PIX";
    case PciePath::kUnknown:
      break;
  }
  return "?";
}

std::string Link::Label() const {
  if (nvlinks > 0) return "NV" + std::to_string(nvlinks);
  return std::string(PciePathName(pcie));
}

Result<Link> ParseLinkCell(std::string_view cell, bool* is_self) {
  *is_self = false;
  cell = Trim(cell);
  Link l;
  if (cell == "X") {
    *is_self = true;
    return l;
  }
  if (cell == "SYS" || cell == "SOC") {
    l.pcie = PciePath::kSys;
  } else if (cell == "NODE") {
    l.pcie = PciePath::kNode;
  } else if (cell == "PHB") {
    l.pcie = PciePath::kPhb;
  } else if (cell == "PXB") {
    l.pcie = PciePath::kPxb;
  } else if (cell == "PIX") {
    l.pcie = PciePath::kPix;
  } else if (StartsWith(cell, "NV")) {
    std::optional<long long> n = ParseInt(cell.substr(2));
    if (!n || *n < 1 || *n > 64) {
      return InvalidArgument("'" + std::string(cell) +
                             "' is not a link (NV must be followed by a count 1-64)");
    }
    l.nvlinks = static_cast<int>(*n);
  } else {
    return InvalidArgument(
        "'" + std::string(cell) +
        "' is not a link (expected X, NV<n>, PIX, PXB, PHB, NODE, SYS or SOC)");
  }
  return l;
}

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "?";
}

Topology::Topology(int gpu_count)
    : gpus_(gpu_count), links_(static_cast<size_t>(gpu_count) * gpu_count) {
  for (int i = 0; i < gpu_count; ++i) gpus_[i].index = i;
}

}  // namespace hachi::topo
