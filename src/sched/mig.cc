#include "sched/mig.h"

#include <algorithm>
#include <cctype>

namespace hachi::sched {
namespace {

// "<digits><suffix>" at the front of `s`: consumed, true.
bool Eat(std::string_view& s, std::string_view suffix) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || s.substr(i, suffix.size()) != suffix) return false;
  s.remove_prefix(i + suffix.size());
  return true;
}

bool SlotBusy(const Node& node, const std::vector<uint8_t>& busy, size_t k) {
  return k < busy.size() ? busy[k] != 0 : node.mig[k].job != 0;
}

}  // namespace

bool LooksLikeMigProfile(std::string_view s) {
  std::string_view rest = s;
  std::string_view probe = rest;
  if (Eat(probe, "c.")) rest = probe;  // compute instance profile: 1c.3g.40gb
  if (!Eat(rest, "g.") || !Eat(rest, "gb")) return false;
  if (rest.empty()) return true;
  if (rest[0] != '+' || rest.size() < 2) return false;  // +me, +gfx, +me.all
  return std::all_of(rest.begin() + 1, rest.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || c == '.';
  });
}

int FindMigSlot(const Node& node, std::string_view uuid) {
  for (size_t k = 0; k < node.mig.size(); ++k) {
    if (node.mig[k].uuid == uuid) return static_cast<int>(k);
  }
  return -1;
}

int CountMigSlots(const Node& node, const std::string& profile) {
  return static_cast<int>(
      std::count_if(node.mig.begin(), node.mig.end(),
                    [&](const MigSlot& m) { return m.profile == profile; }));
}

int CountFreeMigSlots(const Node& node, const std::vector<uint8_t>& busy,
                      const std::string& profile) {
  int n = 0;
  for (size_t k = 0; k < node.mig.size(); ++k) {
    n += node.mig[k].profile == profile && !SlotBusy(node, busy, k);
  }
  return n;
}

std::vector<int> PickMigSlots(const Node& node, const std::vector<uint8_t>& busy,
                              const std::string& profile, int count) {
  std::vector<int> out;
  for (size_t k = 0; k < node.mig.size() && static_cast<int>(out.size()) < count; ++k) {
    if (node.mig[k].profile == profile && !SlotBusy(node, busy, k)) {
      out.push_back(static_cast<int>(k));
    }
  }
  return out;
}

GpuSet MigParents(const Node& node, const std::vector<int>& slots) {
  GpuSet g;
  for (int k : slots) g = g | GpuSet::FromIndices({node.mig[k].gpu});
  return g;
}

std::string MigProfilesText(const ClusterState& state, const std::vector<int>& nodes) {
  std::vector<std::string> names;
  for (int n : nodes) {
    for (const MigSlot& m : state.nodes[n].mig) names.push_back(m.profile);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string out;
  for (const std::string& p : names) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "none" : out;
}

Status CheckMig(const Node& node, const Allocation& a, const std::string& profile,
                int gpus, JobId job, bool held) {
  const std::string where = "job " + std::to_string(job) + " on node " + node.name + ": ";
  if (a.share_milli > 0 || a.gpu_memory_mib > 0) {
    return Internal(where + "MIG devices with GPU share fields");
  }
  if (static_cast<int>(a.mig.size()) != gpus) {
    return Internal(where + std::to_string(a.mig.size()) + " MIG devices; it asks for " +
                    std::to_string(gpus) + " " + profile);
  }
  std::vector<int> slots;
  for (const std::string& uuid : a.mig) {
    const int k = FindMigSlot(node, uuid);
    if (k < 0) return Internal(where + "no MIG device " + uuid);
    const MigSlot& m = node.mig[k];
    if (m.profile != profile) {
      return Internal(where + "MIG device " + uuid + " is a " + m.profile +
                      "; it asks for " + profile);
    }
    if (std::find(slots.begin(), slots.end(), k) != slots.end()) {
      return Internal(where + "MIG device " + uuid + " twice");
    }
    if (m.job != 0 && !(held && m.job == job)) {
      return Internal(where + "MIG device " + uuid + " is held by job " +
                      std::to_string(m.job));
    }
    slots.push_back(k);
  }
  if (MigParents(node, slots) != a.gpus) {
    return Internal(where + "GPUs {" + a.gpus.ToString() +
                    "} are not those of its MIG devices {" +
                    MigParents(node, slots).ToString() + "}");
  }
  return Status::Ok();
}

void ApplyMig(Node& node, const Allocation& a, JobId job) {
  for (const std::string& uuid : a.mig) {
    const int k = FindMigSlot(node, uuid);
    if (k >= 0) node.mig[k].job = job;
  }
}

void ReleaseMig(Node& node, const Allocation& a, JobId job) {
  for (const std::string& uuid : a.mig) {
    const int k = FindMigSlot(node, uuid);
    if (k >= 0 && node.mig[k].job == job) node.mig[k].job = 0;
  }
}

}  // namespace hachi::sched
