#include "cli/commtest_cmd.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diag/commtest.h"
#include "diag/cuda_library.h"
#include "diag/link_facts.h"
#include "topo/nvml_probe.h"

namespace hachi::cli {
namespace {

struct CommtestFlags {
  bool json = false;
  std::vector<int> gpus;
  int64_t size = int64_t{256} << 20;
  int repeats = 5;
  double threshold = 0.70;
  std::string cuda_library;
  std::string nvml_library;
};

// The link facts from NVML, or why there are none (the measurements run anyway).
std::optional<diag::LinkFacts> ReadFacts(const std::string& nvml_library,
                                         std::string* why) {
  topo::NvmlProbeOptions opts;
  opts.library = nvml_library;
  Result<topo::Topology> t = topo::ProbeNvml(opts);
  if (!t.ok()) {
    *why = t.status().message();
    return std::nullopt;
  }
  Result<const topo::NvmlApi*> api = topo::LoadNvml(topo::NvmlLibraryPath(opts));
  if (!api.ok()) {
    *why = api.status().message();
    return std::nullopt;
  }
  if (topo::nvml::Return rc = (*api)->init(); rc != topo::nvml::kSuccess) {
    *why = "nvmlInit_v2: " + (*api)->ErrorText(rc);
    return std::nullopt;
  }
  Result<diag::LinkFacts> facts = diag::ProbeLinkFacts(**api, *t);
  (*api)->shutdown();
  if (!facts.ok()) {
    *why = facts.status().message();
    return std::nullopt;
  }
  return *std::move(facts);
}

// A run that could not measure: said on stderr, and with --json as a report of one FAIL
// item, so that a monitor reading the JSON learns why rather than finding nothing.
int CannotRun(const CommtestFlags& f, const char* check, const Status& why,
              const char* fix) {
  std::fprintf(stderr, "hachi commtest: %s\n", why.message().c_str());
  if (!f.json) return 2;
  diag::CommtestReport r;
  r.size_bytes = f.size;
  r.threshold = f.threshold;
  r.checks.push_back({check, diag::CheckStatus::kFail, {}, why.message(), fix});
  const std::string out = diag::RenderCommtestJson(r);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 2;
}

int Run(const CommtestFlags& f) {
  Result<const diag::CudaApi*> cuda =
      diag::LoadCuda(diag::ResolveCudaLibrary(f.cuda_library));
  if (!cuda.ok()) {
    return CannotRun(f, "commtest-cuda", cuda.status(),
                     "install the NVIDIA driver (libcuda.so.1), or name it with "
                     "--cuda-library");
  }
  std::string why;
  std::optional<diag::LinkFacts> facts = ReadFacts(f.nvml_library, &why);
  diag::CommtestOptions opts;
  opts.size_bytes = f.size;
  opts.repeats = f.repeats;
  opts.gpus = f.gpus;
  opts.threshold = f.threshold;
  Result<diag::CommtestReport> r =
      diag::RunCommtest(**cuda, facts ? &*facts : nullptr, opts);
  if (!r.ok()) {
    return CannotRun(f, "commtest", r.status(),
                     "run hachi doctor: it names what is wrong with the driver or GPUs");
  }
  if (!facts) r->expectations_note = "no NVML (" + why + "): expected figures unknown";
  const std::string out =
      f.json ? diag::RenderCommtestJson(*r) : diag::RenderCommtestText(*r);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!out.empty() && out.back() != '\n') std::fputc('\n', stdout);
  return diag::CommtestExitCode(*r);
}

}  // namespace

void AddCommtestCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<CommtestFlags>();
  CLI::App* cmd = app.add_subcommand(
      "commtest",
      "measure this node's GPU interconnect (P2P, host and all-pairs copy bandwidth, "
      "latency) against what each link should give; exit 0 good, 1 warnings, 2 a figure "
      "below the threshold");
  cmd->add_flag("--json", f->json, "print one JSON object (with a `checks` array)");
  cmd->add_option("--gpu", f->gpus, "only this GPU and the pairs it is in (repeat)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--size", f->size, "bytes per copy (default 256 MiB)")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 34));
  cmd->add_option("--repeats", f->repeats, "timed copies per figure after a warm-up")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--threshold", f->threshold,
                  "flag a figure below this fraction of its expectation (default 0.70)")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option(
      "--cuda-library", f->cuda_library,
      "the CUDA driver to load (default $HACHI_CUDA_LIBRARY, else libcuda.so.1)");
  cmd->add_option(
      "--nvml-library", f->nvml_library,
      "the NVML to load (default $HACHI_NVML_LIBRARY, else libnvidia-ml.so.1)");
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace hachi::cli
