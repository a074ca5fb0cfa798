#include "topo/topology.h"

#include <algorithm>
#include <optional>
#include <utility>

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

namespace hachi::topo {

int MigDevice::slices() const {
  // The first component counts the device's own compute slices: "1c" of 1c.3g.40gb (a
  // compute instance inside a 3-slice GPU instance), else the "1g" of 1g.10gb.
  std::string_view first = std::string_view(profile).substr(0, profile.find('.'));
  if (first.size() < 2 || (first.back() != 'g' && first.back() != 'c')) return 0;
  std::optional<long long> n = ParseInt(first.substr(0, first.size() - 1));
  return n && *n > 0 && *n <= 64 ? static_cast<int>(*n) : 0;
}

std::string MigLayoutText(const std::vector<MigDevice>& devices) {
  if (devices.empty()) return "no instances";
  std::vector<std::pair<std::string, int>> counts;  // first-met order
  for (const MigDevice& d : devices) {
    const std::string name = d.profile.empty() ? "?" : d.profile;
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == name; });
    if (it == counts.end()) {
      counts.emplace_back(name, 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [name, n] : counts) {
    out += (out.empty() ? "" : ", ") + name + (n > 1 ? " x" + std::to_string(n) : "");
  }
  return out;
}

}  // namespace hachi::topo
