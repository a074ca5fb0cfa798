// diag/doctor.h's renderers: a table for people and one JSON object for tools (the
// burn-in gate reads its `checks`).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/gpu_set.h"
#include "core/strings.h"
#include "diag/doctor.h"

namespace hachi::diag {
namespace {

// The evidence without its "GPU n: " lead, which the table's GPU column shows.
std::string Bare(const CheckItem& c) {
  if (c.gpus.size() != 1) return c.evidence;
  const std::string lead = "GPU " + std::to_string(c.gpus[0]) + ": ";
  return StartsWith(c.evidence, lead) ? c.evidence.substr(lead.size()) : c.evidence;
}

std::string GpuColumn(const std::vector<int>& gpus) {
  if (gpus.empty()) return "-";
  if (gpus.size() == 2) return std::to_string(gpus[0]) + "-" + std::to_string(gpus[1]);
  return GpuSet::FromIndices(gpus).ToString();
}

std::string Row(const char* status, const std::string& check, const std::string& gpu,
                const std::string& evidence) {
  char head[64];
  std::snprintf(head, sizeof(head), "%-6s %-15s %-6s ", status, check.c_str(),
                gpu.c_str());
  return head + evidence + "\n";
}

}  // namespace

std::string RenderDoctorText(const DoctorReport& r) {
  std::string out = "hachi doctor: " + (r.node.empty() ? "this node" : r.node);
  if (r.nvml) {
    std::string model = r.gpus.empty() ? "" : r.gpus[0].name;
    for (const DoctorGpu& g : r.gpus) {
      if (g.name != model) model = "mixed models";
    }
    out += ", " + std::to_string(r.gpus.size()) + " GPUs" +
           (model.empty() ? "" : " (" + model + ")") + ", driver " +
           (r.driver_version.empty() ? "?" : r.driver_version);
  } else {
    out += ", no NVIDIA driver";
  }
  out += "\n";
  if (!r.preset.empty() || r.expected_gpus > 0) {
    out += "expected: " + (r.preset.empty() ? "" : "preset " + r.preset + ", ") +
           std::to_string(r.expected_gpus) + " GPUs\n";
  }
  if (r.only_gpu >= 0) {
    out += "GPU " + std::to_string(r.only_gpu) + " only (and the node-wide checks)\n";
  }
  out += "\n" + Row("STATUS", "CHECK", "GPU", "EVIDENCE");
  int counts[3] = {0, 0, 0};
  for (size_t i = 0; i < r.checks.size();) {
    const CheckItem& c = r.checks[i];
    ++counts[static_cast<int>(c.status)];
    // OK items of one check that say the same of each GPU: one row for them all.
    size_t j = i + 1;
    GpuSet folded = GpuSet::FromIndices(c.gpus);
    if (c.status == CheckStatus::kOk && c.gpus.size() == 1) {
      for (; j < r.checks.size(); ++j) {
        const CheckItem& d = r.checks[j];
        if (d.check != c.check || d.status != CheckStatus::kOk || d.gpus.size() != 1 ||
            Bare(d) != Bare(c)) {
          break;
        }
        folded.Insert(d.gpus[0]);
        ++counts[0];
      }
    }
    out += Row(CheckStatusName(c.status), c.check,
               j > i + 1 ? folded.ToString() : GpuColumn(c.gpus), Bare(c));
    if (!c.fix.empty()) out += std::string(30, ' ') + "fix: " + c.fix + "\n";
    i = j;
  }
  const CheckStatus worst = WorstStatus(r.checks);
  out += "\n" + std::string(CheckStatusName(worst)) + ": " + std::to_string(counts[2]) +
         " FAIL, " + std::to_string(counts[1]) + " WARN, " + std::to_string(counts[0]) +
         " OK\n";
  return out;
}

std::string RenderDoctorJson(const DoctorReport& r) {
  nlohmann::json j;
  j["node"] = r.node;
  if (r.nvml) {
    j["driver"] = {{"version", r.driver_version},
                   {"nvml_version", r.nvml_version},
                   {"cuda_version", r.cuda_version}};
  } else {
    j["driver"] = nullptr;
  }
  j["gpus"] = nlohmann::json::array();
  for (const DoctorGpu& g : r.gpus) {
    j["gpus"].push_back({{"index", g.index}, {"name", g.name}, {"bus_id", g.bus_id}});
  }
  if (!r.preset.empty() || r.expected_gpus > 0) {
    j["expected"] = {{"gpus", r.expected_gpus}};
    j["expected"]["preset"] =
        r.preset.empty() ? nlohmann::json() : nlohmann::json(r.preset);
  }
  if (r.only_gpu >= 0) j["gpu"] = r.only_gpu;
  j["checks"] = CheckItemsJson(r.checks);
  j["status"] = CheckStatusName(WorstStatus(r.checks));
  return j.dump(2) + "\n";
}

}  // namespace hachi::diag
