// The nodes as `hachi nodes`, sinfo and `hachi show node` print them (slurm_format.h):
// sinfo's format fields, node states in Slurm's words (burst nodes' power included), and
// a node's GPU picture.
#include <algorithm>

#include "api/clock_offset.h"
#include "cli/slurm_format.h"
#include "cli/slurm_job_text.h"
#include "cli/table.h"
#include "core/strings.h"
#include "core/time_format.h"
#include "topo/topology_file.h"

namespace hachi::cli {
namespace {

using slurm_job::Or;
using state::NodeStatus;

struct GpuCounts {
  int alloc = 0, idle = 0, other = 0, total = 0;
  int busy_whole = 0;  // held by a job, whole or fully shared
  int partial = 0;     // shared, with room left
};

GpuCounts CountGpus(const NodeStatus& n) {
  GpuCounts c;
  c.total = n.gpus;
  const bool unavailable = n.record.state != state::NodeState::kUp;
  for (int g = 0; g < n.gpus; ++g) {
    const bool used = g < static_cast<int>(n.gpu_jobs.size()) && n.gpu_jobs[g] != 0;
    const int share =
        g < static_cast<int>(n.gpu_share_milli.size()) ? n.gpu_share_milli[g] : 0;
    if (used) {
      ++c.alloc;
      if (share > 0 && share < 1000) ++c.partial;
    } else if (unavailable || n.record.unhealthy.contains(g)) {
      ++c.other;
    } else {
      ++c.idle;
    }
  }
  return c;
}

std::string GresText(const NodeStatus& n) {
  if (n.gpus == 0) return "(null)";
  // A GRES type as admins write them: "NVIDIA H100 80GB HBM3" -> "h100",
  // "NVIDIA A100-SXM4-80GB" -> "a100", "NVIDIA GeForce RTX 4090" -> "rtx4090".
  std::string model = ToLower(n.gpu_model);
  for (std::string_view p : {"nvidia ", "geforce ", "tesla "}) {
    if (StartsWith(model, p)) model = model.substr(p.size());
  }
  std::replace(model.begin(), model.end(), '-', ' ');
  std::vector<std::string_view> words;
  for (std::string_view w : Split(model, ' ')) {
    if (!w.empty()) words.push_back(w);
  }
  auto has_digit = [](std::string_view w) {
    return std::any_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  model = words.empty() ? "" : std::string(words[0]);
  if (words.size() > 1 && !has_digit(words[0])) model += words[1];
  return model.empty() ? "gpu:" + std::to_string(n.gpus)
                       : "gpu:" + model + ":" + std::to_string(n.gpus);
}

// Each `hachi nodes` (sinfo -N -o) code's column title, as sinfo names it.
struct NodeTitleRow {
  char code;
  const char* title;
};
constexpr NodeTitleRow kNodeTitles[] = {
    {'N', "NODELIST"}, {'n', "HOSTNAMES"}, {'P', "PARTITION"},     {'t', "STATE"},
    {'T', "STATE"},    {'G', "GRES"},      {'j', "GPUS(A/I/O/T)"}, {'C', "CPUS(A/I/O/T)"},
    {'c', "CPUS"},     {'m', "MEMORY"},    {'e', "FREE_MEM"},      {'O', "CPU_LOAD"},
    {'E', "REASON"},   {'D', "NODES"},     {'o', "NODE_ADDR"},
};

std::string NodeTitle(char code) {
  for (const NodeTitleRow& r : kNodeTitles) {
    if (r.code == code) return r.title;
  }
  return "?";
}

std::string NodeValue(const NodeStatus& n, char code) {
  const state::NodeRecord& r = n.record;
  switch (code) {
    case 'N':
    case 'n':
      return r.name;
    case 'P': {
      std::string out;
      for (const auto& p : n.partitions) out += (out.empty() ? "" : ",") + p;
      return Or(out, "(none)");
    }
    case 't':  // hachi nodes says burn-in where sinfo says drain
      return InBurnIn(n) ? "burn-in" : NodeStateText(n, false);
    case 'T':
      return InBurnIn(n) ? "burn-in" : NodeStateText(n, true);
    case 'G':
      return GresText(n);
    case 'j': {
      GpuCounts c = CountGpus(n);
      return std::to_string(c.alloc) + "/" + std::to_string(c.idle) + "/" +
             std::to_string(c.other) + "/" + std::to_string(c.total);
    }
    case 'C': {
      int alloc = std::min(n.alloc_cpus, r.cpus);
      int rest = r.cpus - alloc;
      bool other = r.state != state::NodeState::kUp;
      return std::to_string(alloc) + "/" + std::to_string(other ? 0 : rest) + "/" +
             std::to_string(other ? rest : 0) + "/" + std::to_string(r.cpus);
    }
    case 'c':
      return std::to_string(r.cpus);
    case 'm':
      return std::to_string(r.memory_mib);
    case 'e':
      return std::to_string(std::max<int64_t>(0, r.memory_mib - n.alloc_memory_mib));
    case 'O':
      return "N/A";
    case 'E':
      return Or(r.state_reason, "none");
    case 'D':
      return "1";
    case 'o':
      return Or(r.address, "(null)");
    case 'f': {  // AVAIL_FEATURES
      std::string out;
      for (const std::string& f : n.features) out += (out.empty() ? "" : ",") + f;
      return Or(out, "(null)");
    }
  }
  return "";
}

}  // namespace

namespace {

// A burst node's power as Slurm shows a powered node (docs/pools.md): the state it
// shows, sinfo's suffix and scontrol's flag. On (and in burn-in) shows as any node.
struct PowerShown {
  std::string_view power;
  std::string_view word;
  std::string_view suffix;
  std::string_view flag;
};
constexpr PowerShown kPowerShown[] = {
    {"off", "idle", "~", "+POWERED_DOWN"},
    {"resuming", "idle", "#", "+POWERING_UP"},
    {"suspending", "idle", "%", "+POWERING_DOWN"},
    {"resume-failed", "down", "~", "+POWERED_DOWN"},
};

const PowerShown* PowerOf(const NodeStatus& n) {
  for (const PowerShown& p : kPowerShown) {
    if (p.power == n.power) return &p;
  }
  return nullptr;
}

std::string StateWord(const NodeStatus& n, bool long_form) {
  GpuCounts c = CountGpus(n);
  const bool busy = c.alloc > 0 || n.alloc_cpus > 0;
  switch (n.record.state) {
    case state::NodeState::kDown:
      return "down";
    case state::NodeState::kDrained:
    case state::NodeState::kBurnIn:  // Slurm's word for out of service, with
                                     // the burn-in in the reason (sinfo -R)
      if (busy) return long_form ? "draining" : "drng";
      return long_form ? "drained" : "drain";
    case state::NodeState::kUp:
      break;
  }
  if (!busy) return "idle";
  const bool full = c.idle == 0 && c.partial == 0 && c.alloc > 0;
  if (full) return long_form ? "allocated" : "alloc";
  return long_form ? "mixed" : "mix";
}

}  // namespace

bool InBurnIn(const NodeStatus& n) {
  return n.record.state == state::NodeState::kBurnIn && PowerOf(n) == nullptr;
}

std::string NodeStateText(const NodeStatus& n, bool long_form) {
  if (const PowerShown* p = PowerOf(n))
    return std::string(p->word) + std::string(p->suffix);
  return StateWord(n, long_form);
}

std::string NodeStateFlags(const NodeStatus& n) {
  std::string out;
  const PowerShown* p = PowerOf(n);
  out = p != nullptr ? std::string(p->word) : StateWord(n, true);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!n.pool.empty()) out += "+CLOUD";  // Slurm's word for a node powered on demand
  if (p != nullptr) out += p->flag;
  return out;
}

std::string NodeFieldTitle(char code) { return NodeTitle(code); }
std::string NodeFieldValue(const NodeStatus& n, char code) { return NodeValue(n, code); }

Result<std::string> FormatNodes(const std::vector<NodeStatus>& nodes,
                                std::string_view format) {
  if (format.empty()) format = kDefaultNodesFormat;
  Result<std::vector<FormatItem>> items = ParseFormatString(format, "NnPtTGjCcmeOEDo");
  if (!items.ok()) return items.status();
  std::string out = RenderFormatLine(*items, NodeTitle) + "\n";
  for (const NodeStatus& n : nodes) {
    out += RenderFormatLine(*items, [&](char c) { return NodeValue(n, c); }) + "\n";
  }
  return out;
}

namespace {

// The devices of MIG GPU `gpu` that jobs hold ("1g.10gb job 12"), wrapped under it.
std::string MigInUse(const NodeStatus& n, int gpu) {
  std::string o, line;
  for (const state::NodeMigDevice& m : n.mig_devices) {
    if (m.gpu != gpu || m.job == 0) continue;
    const std::string item = m.profile + " job " + std::to_string(m.job);
    if (line.empty()) {
      line = "    in use: " + item;
    } else if (line.size() + 2 + item.size() > 78) {
      o += line + ",\n";
      line = "            " + item;
    } else {
      line += ", " + item;
    }
  }
  return line.empty() ? o : o + line + "\n";
}

// The GPUs of `n` in MIG mode and the devices each is split into, read from the topology
// its agent registered, with the jobs that hold them (scheduled as devices).
// The GPUs of `n` in MIG mode (with or without devices), from its topology.
GpuSet MigGpus(const NodeStatus& n) {
  GpuSet out;
  if (n.record.topology_json.find("\"mig_enabled\"") == std::string::npos) return out;
  Result<topo::Topology> t =
      topo::ParseTopologyJson(n.record.topology_json, n.record.name);
  if (!t.ok()) return out;
  for (const topo::Gpu& g : t->gpus()) {
    if (g.mig_enabled) out = out | GpuSet::FromIndices({g.index});
  }
  return out;
}

std::string MigLines(const NodeStatus& n) {
  // Only MIG GPUs write the key, so other nodes' topologies are not parsed at all.
  if (n.record.topology_json.find("\"mig_enabled\"") == std::string::npos) return "";
  Result<topo::Topology> t =
      topo::ParseTopologyJson(n.record.topology_json, n.record.name);
  if (!t.ok()) return "";
  std::string o;
  for (const topo::Gpu& g : t->gpus()) {
    if (!g.mig_enabled) continue;
    o += "  gpu" + std::to_string(g.index) + " MIG: " +
         (g.mig_devices.empty()
              ? std::string("on, no instances: cannot run jobs until they are created")
              : topo::MigLayoutText(g.mig_devices)) +
         "\n" + MigInUse(n, g.index);
  }
  return o;
}

}  // namespace

std::string FormatGpuPicture(const NodeStatus& n) {
  std::string head = n.record.name + "  " + std::to_string(n.gpus) + "x " +
                     Or(n.gpu_model, "GPU") + "  " + Or(n.interconnect, "unknown") +
                     "  " + (InBurnIn(n) ? "burn-in" : NodeStateText(n, true));
  if (!n.record.state_reason.empty()) head += " (" + n.record.state_reason + ")";
  if (!n.record.cgroup.empty()) head += "  cgroup " + n.record.cgroup;  // job isolation
  std::string o = head + "\n";
  // How its GPU shares are isolated, and what MPS did lately.
  if (n.record.gpu_sharing == "mps") {
    o += "GPU shares: MPS (a server per shared GPU holds each share to its limits)\n";
  } else if (StartsWith(n.record.gpu_sharing, "soft-limit: ")) {
    o += "GPU shares: no MPS (" + n.record.gpu_sharing.substr(12) +
         "): a share that uses more GPU memory than promised is ended\n";
  }
  for (const std::string& e : n.gpu_sharing_events) o += "  " + e + "\n";
  constexpr int kPerLine = 4;
  constexpr int kCell = 19;            // 2 + 4 * 19 = 78 columns
  const GpuSet mig_gpus = MigGpus(n);  // never given whole
  std::string row;
  for (int g = 0; g < n.gpus; ++g) {
    const state::JobId job = g < static_cast<int>(n.gpu_jobs.size()) ? n.gpu_jobs[g] : 0;
    const int share =
        g < static_cast<int>(n.gpu_share_milli.size()) ? n.gpu_share_milli[g] : 0;
    const bool bad = n.record.unhealthy.contains(g);
    std::string what;
    int mig = 0, mig_used = 0;  // its MIG devices, and those in use
    for (const state::NodeMigDevice& m : n.mig_devices) {
      mig += m.gpu == g;
      mig_used += m.gpu == g && m.job != 0;
    }
    if (mig > 0 || mig_gpus.contains(g)) {
      what = mig > 0
                 ? "MIG " + std::to_string(mig_used) + "/" + std::to_string(mig) + " used"
                 : std::string("MIG, none");
      if (bad) what += " !bad";
    } else if (job == 0) {
      what = bad ? "UNHEALTHY" : "free";
    } else {
      what = std::to_string(job);
      if (share > 0) what += " sh=" + std::to_string(share);
      if (bad) what += " !bad";
    }
    std::string cell = "gpu" + std::to_string(g) + " " + what;
    const bool last_in_line = g % kPerLine == kPerLine - 1 || g + 1 == n.gpus;
    if (!last_in_line) cell.resize(std::max(cell.size() + 1, size_t{kCell}), ' ');
    row += cell;
    if (last_in_line) {
      o += "  " + row + "\n";
      row.clear();
    }
  }
  o += MigLines(n);
  // Why each unhealthy GPU is out of service (hachi resume NODE --gpu N puts it back).
  for (const auto& [gpu, why] : n.record.unhealthy_reasons) {
    o += "  gpu" + std::to_string(gpu) + " unhealthy: " + why + "\n";
  }
  // Processes on GPUs no job of theirs was given: they take memory and compute from the
  // job placed there, and the scheduler cannot see them.
  for (const state::StrayGpuProcess& p : n.stray_processes) {
    o += "  gpu" + std::to_string(p.gpu) + " stray process: pid " +
         std::to_string(p.pid) + " (" + Or(p.user, "?") + ": " + Or(p.command, "?") + ")";
    if (p.used_mib >= 0) o += " " + std::to_string(p.used_mib) + " MiB";
    if (p.job != 0) {
      o += ", of job " + std::to_string(p.job) + ", which was not given this GPU";
    } else {
      o += ", not started by Hachi";
    }
    if (p.since > 0) o += ", since " + FormatSlurmLocal(p.since);
    o += "\n";
  }
  return o;
}

std::string FormatClockLine(const state::NodeStatus& n) {
  std::string o = "  clock: " + api::FormatClockOffset(n.clock_offset_ms);
  if (!n.clock_offset_ms)
    return o + " (its agent has not said since the server started)\n";
  // Within the picture's 80 columns for offsets under a day.
  o += " off the server's";
  if (api::ClockOffsetIsProblem(*n.clock_offset_ms)) {
    o += ": over " + std::to_string(api::kClockOffsetProblemMs / 1000) +
         "s, fix the node's time sync (NTP)";
  }
  return o + "\n";
}

}  // namespace hachi::cli
