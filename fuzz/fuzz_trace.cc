// libFuzzer target for the simulator's readers (sim/trace.h, sim/cluster_spec.h and its
// Philly machine list, sim/placement/openb.h): every reader gets the same bytes (each
// rejects the others' headers at once), and must return jobs, nodes or pods, or an error,
// never a crash, hang or sanitizer report. What is accepted must hold the documented
// contract:
//   - traces: sorted by submit, ids 1..n, time zero at the first submit, durations
//     >= 1 s, GPU counts that make a gang shape, limits 0 or >= the run time, the row
//     within the file, an account and a user on every job;
//   - openb: node GPU counts 0..8 and model indices in range; pods' model masks only
//     name models the cluster has (or bit 31, none), shares only on one GPU.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "sim/cluster_spec.h"
#include "sim/placement/openb.h"
#include "sim/trace.h"

namespace {

using namespace hachi;  // NOLINT: a fuzz target's one function

void CheckTrace(const Result<std::vector<sim::TraceJob>>& jobs, std::string_view text) {
  if (!jobs.ok()) {
    FUZZ_CHECK(jobs.status().code() == StatusCode::kInvalidArgument,
               jobs.status().ToString());
    FUZZ_CHECK(jobs.status().message().rfind("trace.csv", 0) == 0,
               jobs.status().ToString());
    return;
  }
  int64_t lines = 1;
  for (char c : text) lines += c == '\n';
  for (size_t i = 0; i < jobs->size(); ++i) {
    const sim::TraceJob& j = (*jobs)[i];
    FUZZ_CHECK(j.id == static_cast<int64_t>(i) + 1, std::to_string(j.id));
    FUZZ_CHECK(i == 0 ? j.submit == 0 : j.submit >= (*jobs)[i - 1].submit,
               "not sorted by submit");
    FUZZ_CHECK(j.duration >= 1, std::to_string(j.duration));
    FUZZ_CHECK(sim::ShapeOf(j.gpus).ok(), std::to_string(j.gpus));
    FUZZ_CHECK(j.time_limit == 0 || j.time_limit >= j.duration,
               "limit below the run time");
    FUZZ_CHECK(j.row >= 2 && j.row <= lines, std::to_string(j.row));
    FUZZ_CHECK(!j.account.empty() && !j.user.empty(), "no account or user");
  }
}

const placement::Cluster& PodCluster() {
  static const placement::Cluster* c = [] {
    Result<placement::Cluster> r = placement::ParseNodes(
        "sn,cpu_milli,memory_mib,gpu,model\nnode-a,96000,786432,8,G2\n"
        "node-c,64000,262144,2,T4\nnode-d,32000,131072,1,P100\n",
        "nodes.csv");
    FUZZ_CHECK(r.ok(), r.status().ToString());
    return new placement::Cluster(std::move(*r));
  }();
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckTrace(sim::ParsePhillyTrace(text, "trace.csv"), text);
  CheckTrace(sim::ParseCsvTrace(text, "trace.csv"), text);
  if (Result<sim::TraceFormat> f = sim::DetectTraceFormat(text, "trace.csv"); f.ok()) {
    CheckTrace(sim::ParseTrace(text, "trace.csv", *f), text);
  }

  const std::string s(text);
  if (Result<placement::Cluster> nodes = placement::ParseNodes(s, "nodes.csv");
      nodes.ok()) {
    for (const placement::OpenbNode& n : nodes->nodes) {
      FUZZ_CHECK(n.gpus >= 0 && n.gpus <= placement::kMaxGpusPerNode, n.sn);
      FUZZ_CHECK(n.model >= 0 && n.model < static_cast<int>(nodes->models.size()), n.sn);
    }
    FUZZ_CHECK(nodes->models.size() <= 31, std::to_string(nodes->models.size()));
  }
  const placement::Cluster& cluster = PodCluster();
  if (Result<std::vector<placement::OpenbPod>> pods =
          placement::ParsePods(s, "pods.csv", cluster);
      pods.ok()) {
    const uint32_t known = (uint32_t{1} << cluster.models.size()) - 1;
    for (const placement::OpenbPod& p : *pods) {
      FUZZ_CHECK((p.spec_mask & ~known & ~(uint32_t{1} << 31)) == 0, p.name);
      FUZZ_CHECK(p.num_gpu >= 0 && p.gpu_milli >= 0, p.name);
      FUZZ_CHECK(!(p.num_gpu > 1 && p.gpu_milli < placement::kMilliPerGpu), p.name);
    }
  }

  // A cluster spec ("96x8:hgx-h100,..."), from the first line only: specs are short.
  const std::string_view first = text.substr(0, std::min<size_t>(text.find('\n'), 256));
  if (first != "philly") {  // that one reads the machine list from ../shared
    Result<sched::ClusterState> c = sim::BuildCluster(first);
    if (c.ok()) {
      FUZZ_CHECK(!c->nodes.empty() && c->partitions.size() == 1, std::string(first));
      FUZZ_CHECK(c->nodes.size() <= static_cast<size_t>(sim::kMaxClusterNodes),
                 std::string(first));
    }
  }
  // The Philly machine list, from memory: one node per row, of 8 or 2 GPUs.
  if (!text.empty()) {
    sim::ClusterOptions options;
    options.philly_machine_list_text = s;
    Result<sched::ClusterState> c = sim::BuildCluster("philly", options);
    if (c.ok()) {
      for (const sched::Node& n : c->nodes) {
        FUZZ_CHECK(n.gpu_count() == 8 || n.gpu_count() == 2, n.name);
      }
    }
  }
  return 0;
}
