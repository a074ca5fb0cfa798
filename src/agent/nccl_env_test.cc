// NCCL_IB_HCA from the NICs of real `nvidia-smi topo -m` outputs (testdata/nvidia-smi).
#include "agent/nccl_env.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/testing/paths.h"
#include "topo/nvidia_smi.h"

namespace hachi::agent {
namespace {

topo::Topology Fixture(const std::string& name) {
  std::ifstream in(SourceDir() + "/testdata/nvidia-smi/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  Result<topo::Topology> t = topo::ParseTopoMatrix(ss.str(), name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : topo::Topology(8);
}

std::string HcaFor(const topo::Topology& t, const std::vector<int>& gpus,
                   EnvList env = {}) {
  AddNcclEnvironment(NearestNics(t), GpuSet::FromIndices(gpus), &env);
  for (const auto& [k, v] : env) {
    if (k == "NCCL_IB_HCA") return v;
  }
  return "(unset)";
}

struct HcaCase {
  std::string name;
  std::string fixture;
  std::vector<int> gpus;
  std::string want;
};

class NcclHca : public testing::TestWithParam<HcaCase> {};

TEST_P(NcclHca, NearestNicsOfTheGrantedGpus) {
  const HcaCase& c = GetParam();
  EXPECT_EQ(HcaFor(Fixture(c.fixture), c.gpus), c.want);
}

// HGX H100 with 12 NICs: a PIX NIC per GPU (NIC0-3 and NIC6-9), and two pairs (NIC4-5,
// NIC10-11) that are only NODE to the GPUs: storage/front-end, never a job's rail.
INSTANTIATE_TEST_SUITE_P(
    Rows, NcclHca,
    testing::Values(
        HcaCase{"hgx_one_gpu", "topo-hgx-h100-12nics-580.txt", {0}, "=mlx5_0"},
        HcaCase{"hgx_pair", "topo-hgx-h100-12nics-580.txt", {0, 1}, "=mlx5_0,mlx5_1"},
        HcaCase{
            "hgx_other_socket", "topo-hgx-h100-12nics-580.txt", {5, 6}, "=mlx5_7,mlx5_8"},
        HcaCase{"hgx_whole_node",
                "topo-hgx-h100-12nics-580.txt",
                {0, 1, 2, 3, 4, 5, 6, 7},
                "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_6,mlx5_7,mlx5_8,mlx5_9"},
        // NIC0..NIC3 without a legend: no names to give NCCL.
        HcaCase{"nics_without_names", "topo-4x-h100-nv6-nccl1617.txt", {0, 1}, "(unset)"},
        HcaCase{"no_nics", "topo-aws-p4d-a100-nv12-gpunumaid.txt", {0, 1}, "(unset)"}),
    [](const testing::TestParamInfo<HcaCase>& row) { return row.param.name; });

TEST(NcclHca, TheJobsOwnSettingWins) {
  const topo::Topology t = Fixture("topo-hgx-h100-12nics-580.txt");
  EXPECT_EQ(HcaFor(t, {0}, {{"NCCL_IB_HCA", "mlx5_4"}}), "mlx5_4");
}

TEST(NcclHca, EveryFixtureWithNicsGivesEachGpuANicOrNone) {
  for (const char* f :
       {"topo-dgx-a100-mlx5-names.txt", "topo-4x-l40s-nics-missalignment106.txt",
        "topo-2x-rtx6000ada-puget-wrx90.txt", "topo-dgx1-v100-vastai-580.txt"}) {
    const topo::Topology t = Fixture(f);
    const std::vector<std::vector<std::string>> near = NearestNics(t);
    ASSERT_EQ(static_cast<int>(near.size()), t.gpu_count()) << f;
    for (const std::vector<std::string>& nics : near) {
      for (const std::string& n : nics) EXPECT_FALSE(n.empty()) << f;
    }
  }
}

}  // namespace
}  // namespace hachi::agent
