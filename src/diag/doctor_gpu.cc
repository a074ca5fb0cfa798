// doctor's per-GPU checks of what NVML answered: persistence mode, the PCIe link, ECC and
// retired memory, clock throttling and MIG mode. Pure functions of NvmlReadings.
#include <string>
#include <utility>

#include "diag/doctor_stages.h"
#include "topo/nvml_api.h"

namespace hachi::diag {
namespace {

namespace nv = topo::nvml;

std::string Gpu(int i) { return "GPU " + std::to_string(i); }

CheckItem Item(std::string check, CheckStatus s, int gpu, std::string evidence,
               std::string fix = "") {
  return {std::move(check), s, {gpu}, Gpu(gpu) + ": " + evidence, std::move(fix)};
}

// The GPUs a check covers: selected and reachable (an unreachable GPU is one FAIL of
// its own, CountChecks').
template <typename Fn>
std::vector<CheckItem> EachGpu(const NvmlReadings& r, int only_gpu, Fn fn) {
  std::vector<CheckItem> out;
  for (const GpuReadings& g : r.gpus) {
    if (Selected(only_gpu, g.index) && g.error.empty()) fn(g, out);
  }
  return out;
}

std::string Link(int gen, int width) {
  return "Gen" + std::to_string(gen) + " x" + std::to_string(width);
}

// Clock event reasons, by what they say about the node. NVIDIA's NVML reference:
// hardware slowdown is raised by the hardware itself (temperature too high, the
// system's power brake, a power draw spike); hardware thermal and power brake name
// which; the software reasons are the driver keeping the GPU inside its power or
// thermal limit, expected under full load. Idle, application clocks, sync boost and
// display clocks are settings, not faults.
struct Reason {
  uint64_t bit;
  CheckStatus status;
  const char* name;
};
constexpr Reason kReasons[] = {
    {nv::kThrottleHwSlowdown, CheckStatus::kFail, "hardware slowdown"},
    {nv::kThrottleHwThermal, CheckStatus::kFail, "hardware thermal slowdown"},
    {nv::kThrottleHwPowerBrake, CheckStatus::kFail, "hardware power brake"},
    {nv::kThrottleSwThermal, CheckStatus::kWarn, "software thermal slowdown"},
    {nv::kThrottleSwPowerCap, CheckStatus::kWarn, "software power cap"},
    {nv::kThrottleGpuIdle, CheckStatus::kOk, "idle"},
    {nv::kThrottleApplicationsClocks, CheckStatus::kOk, "application clocks setting"},
    {nv::kThrottleSyncBoost, CheckStatus::kOk, "sync boost"},
    {nv::kThrottleDisplayClocks, CheckStatus::kOk, "display clocks setting"},
};

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::vector<CheckItem> PersistenceChecks(const NvmlReadings& r, int only_gpu) {
  return EachGpu(r, only_gpu, [](const GpuReadings& g, std::vector<CheckItem>& out) {
    if (!g.persistence) {
      out.push_back(Item("persistence", CheckStatus::kWarn, g.index,
                         "persistence mode unknown (NVML did not say)",
                         "check with nvidia-smi -q -d PERFORMANCE"));
    } else if (*g.persistence) {
      out.push_back(
          Item("persistence", CheckStatus::kOk, g.index, "persistence mode on"));
    } else {
      out.push_back(Item(
          "persistence", CheckStatus::kFail, g.index,
          "persistence mode off: the driver tears the GPU down whenever no process holds "
          "it (slow CUDA starts, ECC and clock settings lost)",
          "enable nvidia-persistenced (systemctl enable --now nvidia-persistenced), or "
          "nvidia-smi -pm 1 until the next boot"));
    }
  });
}

std::vector<CheckItem> PcieChecks(const NvmlReadings& r, int only_gpu,
                                  unsigned replay_warn) {
  std::vector<CheckItem> out =
      EachGpu(r, only_gpu, [](const GpuReadings& g, std::vector<CheckItem>& items) {
        const PcieLinkFacts& p = g.pcie;
        if (p.gen == 0 || p.width == 0 || p.max_gen == 0 || p.max_width == 0) {
          items.push_back(Item("pcie-link", CheckStatus::kWarn, g.index,
                               "PCIe link unknown (NVML did not say)",
                               "check with nvidia-smi -q -d PCIE"));
          return;
        }
        const std::string now = Link(p.gen, p.width), max = Link(p.max_gen, p.max_width);
        if (p.width < p.max_width) {
          items.push_back(Item(
              "pcie-link", CheckStatus::kFail, g.index,
              "PCIe link x" + std::to_string(p.width) + " of x" +
                  std::to_string(p.max_width) + " (" + now + ", max " + max +
                  "): the link trained with fewer lanes, a downtrained link",
              "reseat the GPU (and its riser or cable), check the slot; compare LnkSta "
              "with LnkCap in lspci -vv"));
        } else if (p.gen < p.max_gen) {
          items.push_back(Item(
              "pcie-link", CheckStatus::kWarn, g.index,
              "PCIe Gen" + std::to_string(p.gen) + " of Gen" + std::to_string(p.max_gen) +
                  " (" + now + ", max " + max +
                  "): GPUs lower the link generation when idle to save power, so this is "
                  "a fault only if it stays low under load",
              "run hachi commtest (it loads the link) and check the host copies; if the "
              "generation stays low, check the slot and the BIOS PCIe settings"));
        } else {
          items.push_back(Item("pcie-link", CheckStatus::kOk, g.index,
                               "PCIe " + now + " (max " + max + ")"));
        }
      });
  std::vector<CheckItem> replays =
      EachGpu(r, only_gpu, [&](const GpuReadings& g, std::vector<CheckItem>& items) {
        if (!g.replays) return;  // older GPUs do not count them
        const std::string n = std::to_string(*g.replays) + " PCIe replays";
        if (*g.replays > replay_warn) {
          items.push_back(Item(
              "pcie-replay", CheckStatus::kWarn, g.index,
              n + " since the driver loaded (more than " + std::to_string(replay_warn) +
                  "): the link retransmits, a marginal signal",
              "watch whether it grows (nvidia-smi -q -d PCIE); reseat the GPU, check the "
              "riser or cable"));
        } else {
          items.push_back(Item("pcie-replay", CheckStatus::kOk, g.index,
                               n + " since the driver loaded"));
        }
      });
  out.insert(out.end(), replays.begin(), replays.end());
  return out;
}

std::vector<CheckItem> MemoryChecks(const NvmlReadings& r, int only_gpu) {
  std::vector<CheckItem> ecc =
      EachGpu(r, only_gpu, [](const GpuReadings& g, std::vector<CheckItem>& out) {
        if (!g.ecc_on) {
          out.push_back(Item("ecc", CheckStatus::kOk, g.index, "ECC not supported"));
          return;
        }
        const uint64_t now = g.ecc_uncorrected_volatile.value_or(0);
        const uint64_t life = g.ecc_uncorrected_aggregate.value_or(0);
        if (now > 0) {
          out.push_back(Item(
              "ecc", CheckStatus::kFail, g.index,
              std::to_string(now) + " uncorrectable ECC errors since the driver loaded",
              "drain the GPU, reset it (nvidia-smi -r) and run NVIDIA's field "
              "diagnostic; "
              "replace it if they recur"));
        } else if (!*g.ecc_on) {
          out.push_back(Item("ecc", CheckStatus::kWarn, g.index,
                             "ECC off: memory errors go undetected",
                             "nvidia-smi -e 1, then reset the GPU or reboot"));
        } else if (g.ecc_pending_on && *g.ecc_pending_on != *g.ecc_on) {
          out.push_back(Item("ecc", CheckStatus::kWarn, g.index,
                             "ECC on now, off after the next reset",
                             "nvidia-smi -e 1 to keep it on"));
        } else if (life > 0) {
          out.push_back(Item("ecc", CheckStatus::kWarn, g.index,
                             "ECC on; " + std::to_string(life) +
                                 " uncorrectable errors in the GPU's life, none since "
                                 "the driver loaded",
                             "watch it: errors that come back mean failing memory"));
        } else {
          out.push_back(
              Item("ecc", CheckStatus::kOk, g.index, "ECC on, no uncorrectable errors"));
        }
      });
  std::vector<CheckItem> pages =
      EachGpu(r, only_gpu, [](const GpuReadings& g, std::vector<CheckItem>& out) {
        // Page retirement is what GPUs before Ampere do; later ones remap rows.
        if (g.retired_sbe && g.retired_dbe) {
          const unsigned total = *g.retired_sbe + *g.retired_dbe;
          const std::string counts = std::to_string(total) + " retired pages (" +
                                     std::to_string(*g.retired_sbe) + " single-bit, " +
                                     std::to_string(*g.retired_dbe) + " double-bit)";
          if (g.retired_pending.value_or(false)) {
            out.push_back(Item(
                "retired-pages", CheckStatus::kFail, g.index,
                counts + ", a retirement pending: the bad page stays in use until reset",
                "reset the GPU (nvidia-smi -r) or reboot"));
          } else if (total > 0) {
            out.push_back(Item("retired-pages", CheckStatus::kWarn, g.index, counts,
                               "watch the count; many, or a fast-growing count, mean "
                               "failing memory (NVIDIA's field diagnostic decides RMA)"));
          } else {
            out.push_back(
                Item("retired-pages", CheckStatus::kOk, g.index, "no retired pages"));
          }
        }
      });
  std::vector<CheckItem> remaps =
      EachGpu(r, only_gpu, [](const GpuReadings& g, std::vector<CheckItem>& out) {
        if (g.remap) {
          const GpuReadings::Remap& m = *g.remap;
          const std::string rows = m.uncorrected + m.corrected == 0
                                       ? std::string("no rows remapped")
                                       : std::to_string(m.uncorrected) +
                                             " rows remapped for uncorrectable errors, " +
                                             std::to_string(m.corrected) +
                                             " for correctable";
          if (m.failure) {
            out.push_back(Item(
                "row-remap", CheckStatus::kFail, g.index,
                "row remapping failed (" + rows + "): the bank has no spare rows left",
                "drain the GPU and run NVIDIA's field diagnostic: a remapping failure is "
                "NVIDIA's RMA criterion"));
          } else if (m.pending) {
            out.push_back(Item("row-remap", CheckStatus::kFail, g.index,
                               "a row remap is pending (" + rows +
                                   "): the bad row stays in use until the GPU is reset",
                               "reset the GPU (nvidia-smi -r) or reboot"));
          } else {
            out.push_back(Item("row-remap", CheckStatus::kOk, g.index, rows));
          }
        }
      });
  ecc.insert(ecc.end(), pages.begin(), pages.end());
  ecc.insert(ecc.end(), remaps.begin(), remaps.end());
  return ecc;
}

std::vector<CheckItem> ClockChecks(const NvmlReadings& r, int only_gpu) {
  return EachGpu(r, only_gpu, [](const GpuReadings& g, std::vector<CheckItem>& out) {
    if (!g.clock_reasons) return;
    const uint64_t bits = *g.clock_reasons;
    CheckStatus worst = CheckStatus::kOk;
    std::string named;
    for (const Reason& reason : kReasons) {
      if ((bits & reason.bit) == 0) continue;
      named += (named.empty() ? "" : ", ") + std::string(reason.name);
      worst = std::max(worst, reason.status);
    }
    if (bits == 0) {
      out.push_back(Item("clocks", CheckStatus::kOk, g.index, "clocks not held back"));
      return;
    }
    const std::string what = "clocks held back: " + (named.empty() ? "?" : named) +
                             " (reasons " + Hex(bits) + ")";
    std::string fix;
    if (worst == CheckStatus::kFail) {
      fix = bits & nv::kThrottleHwPowerBrake
                ? "the chassis asserted the power brake: check the power supplies and "
                  "the BMC's event log"
                : "check the cooling: fans, airflow, inlet temperature, the heat sink "
                  "(nvidia-smi -q -d TEMPERATURE,PERFORMANCE)";
    } else if (worst == CheckStatus::kWarn) {
      fix =
          "expected under full load; at idle, check the power limit and the cooling "
          "(nvidia-smi -q -d POWER,TEMPERATURE)";
    }
    out.push_back(Item("clocks", worst, g.index, what, fix));
  });
}

std::vector<CheckItem> MigChecks(const NvmlReadings& r, const Expectation& e,
                                 int only_gpu) {
  return EachGpu(r, only_gpu, [&](const GpuReadings& g, std::vector<CheckItem>& out) {
    auto word = [](bool on) { return on ? std::string("on") : std::string("off"); };
    if (!g.mig_now) {
      if (e.mig.value_or(false)) {
        out.push_back(Item("mig", CheckStatus::kFail, g.index,
                           "MIG not supported, expected on",
                           "MIG needs an A100, A30, H100 or later datacenter GPU"));
      } else {
        out.push_back(Item("mig", CheckStatus::kOk, g.index, "MIG not supported"));
      }
      return;
    }
    const bool now = *g.mig_now != 0;
    const bool pending = g.mig_pending.value_or(*g.mig_now) != 0;
    // The layout as the topology probe read it (Hachi uses what it finds).
    const topo::Gpu* probed =
        g.index < r.topology.gpu_count() ? &r.topology.gpu(g.index) : nullptr;
    const bool listed = now && probed && probed->mig_enabled;
    const std::string layout = listed && !probed->mig_devices.empty()
                                   ? ": " + topo::MigLayoutText(probed->mig_devices)
                                   : "";
    const std::string toggle = "nvidia-smi -i " + std::to_string(g.index) + " -mig " +
                               (e.mig.value_or(now) ? "1" : "0") +
                               ", then reset the GPU (nvidia-smi -r)";
    if (e.mig && *e.mig != now) {
      out.push_back(
          Item("mig", CheckStatus::kFail, g.index,
               "MIG " + word(now) + ", expected " + word(*e.mig) +
                   (pending != now ? " (" + word(pending) + " after a reset)" : ""),
               pending == *e.mig ? "reset the GPU (nvidia-smi -r) or reboot" : toggle));
    } else if (pending != now) {
      out.push_back(Item("mig", CheckStatus::kWarn, g.index,
                         "MIG " + word(now) + layout + ", " + word(pending) +
                             " after the next reset (a change is pending)",
                         "reset the GPU (nvidia-smi -r) or undo the change"));
    } else if (listed && probed->mig_devices.empty()) {
      // The probe's mig-no-instances finding; the topology item leaves it to this one.
      out.push_back(Item(
          "mig", CheckStatus::kWarn, g.index,
          "MIG on, no instances: the GPU cannot run jobs until instances are created",
          "create them (nvidia-smi mig -i " + std::to_string(g.index) +
              " -cgi PROFILES -C), or turn MIG off (nvidia-smi -i " +
              std::to_string(g.index) + " -mig 0, then reset the GPU)"));
    } else {
      out.push_back(Item("mig", CheckStatus::kOk, g.index,
                         "MIG " + word(now) + layout + (e.mig ? ", as expected" : "")));
    }
  });
}

}  // namespace hachi::diag
