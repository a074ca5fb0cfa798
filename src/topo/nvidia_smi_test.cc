// Every shared `nvidia-smi` fixture (testdata/nvidia-smi, copied from
// ../shared/fixtures/nvidia-smi) read in a table with its expected summary, plus the
// variants pasting produces (tabs expanded, spaces collapsed, CRLF, a lost leading tab)
// and broken inputs that must give findings or errors, never a crash.
#include "topo/nvidia_smi.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "core/strings.h"
#include "core/testing/paths.h"
#include "topo/analysis.h"

namespace hachi::topo {
namespace {

std::string Fixture(const std::string& name) {
  std::string err;
  std::optional<std::string> text =
      ReadFile(SourceDir() + "/testdata/nvidia-smi/" + name, &err);
  EXPECT_TRUE(text.has_value()) << err;
  return text.value_or("");
}

struct LinkSpot {
  int a, b;
  const char* label;
};

struct FixtureCase {
  const char* name;
  const char* file;
  int gpus;
  int nics;
  InterconnectClass cls;
  std::vector<LinkSpot> links;
  int gpu0_numa;
  const char* last_cpu_affinity;  // CPU affinity of the last GPU
  const char* first_nic_device;   // "" when no NIC
  int errors;                     // findings of severity error
};

class FixtureTest : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(FixtureTest, ReadsSummary) {
  const FixtureCase& c = GetParam();
  Result<Topology> r = ParseTopoMatrix(Fixture(c.file), c.file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Topology& t = *r;
  EXPECT_EQ(t.gpu_count(), c.gpus);
  EXPECT_EQ(static_cast<int>(t.nics().size()), c.nics);
  TopologyFacts facts = Analyze(t);
  EXPECT_EQ(InterconnectClassName(facts.interconnect), InterconnectClassName(c.cls));
  for (const LinkSpot& l : c.links) {
    EXPECT_EQ(t.link(l.a, l.b).Label(), l.label) << "GPU" << l.a << "-GPU" << l.b;
    EXPECT_EQ(t.link(l.b, l.a).Label(), l.label) << "GPU" << l.b << "-GPU" << l.a;
  }
  EXPECT_EQ(t.gpu(0).numa_node, c.gpu0_numa);
  EXPECT_EQ(t.gpu(c.gpus - 1).cpu_affinity, c.last_cpu_affinity);
  if (c.nics > 0) {
    EXPECT_EQ(t.nics()[0].device, c.first_nic_device);
  }
  std::vector<Finding> findings = CheckTopology(t);
  int errors = 0;
  for (const Finding& f : findings) errors += f.severity == Severity::kError;
  EXPECT_EQ(errors, c.errors);
  for (const Finding& f : findings) {
    EXPECT_FALSE(f.message.empty());
  }
}

using IC = InterconnectClass;
INSTANTIATE_TEST_SUITE_P(
    SharedFixtures, FixtureTest,
    ::testing::Values(
        FixtureCase{"a100_pcie_della",
                    "topo-2x-a100-pcie-della-sys.txt",
                    2,
                    2,
                    IC::kPcieOnly,
                    {{0, 1, "SYS"}},
                    0,
                    "64-127",
                    "mlx5_0",
                    0},
        FixtureCase{"rtx6000_puget",
                    "topo-2x-rtx6000ada-puget-wrx90.txt",
                    2,
                    2,
                    IC::kPcieOnly,
                    {{0, 1, "PHB"}},
                    0,
                    "0-23",
                    "mlx5_0",
                    0},
        FixtureCase{"h100_nv6_4gpu",
                    "topo-4x-h100-nv6-nccl1617.txt",
                    4,
                    4,
                    IC::kNvSwitch,
                    {{0, 3, "NV6"}, {1, 2, "NV6"}},
                    3,
                    "5,13,21,29",
                    "NIC0",
                    0},
        FixtureCase{"l40s_4gpu",
                    "topo-4x-l40s-nics-missalignment106.txt",
                    4,
                    2,
                    IC::kPcieOnly,
                    {{0, 1, "NODE"}, {1, 2, "SYS"}, {2, 3, "NODE"}},
                    0,
                    "96-191,288-383",
                    "mlx5_0",
                    0},
        FixtureCase{"rtx6000_asus",
                    "topo-4x-rtx6000ada-asus-esc8000a-e12.txt",
                    4,
                    4,
                    IC::kPcieOnly,
                    {{0, 1, "NODE"}, {0, 2, "SYS"}},
                    0,
                    "32-63",
                    "mlx5_0",
                    0},
        FixtureCase{"a100_vm_malformed",
                    "topo-8x-a100-vm-malformed-ph0-cells.txt",
                    8,
                    8,
                    IC::kNvSwitch,
                    {{0, 7, "NV12"}, {3, 4, "NV12"}},
                    -1,
                    "",
                    "mlx5_0",
                    1},
        FixtureCase{"pcie_pix_pxb",
                    "topo-8x-pcie-pix-pxb-quda669.txt",
                    8,
                    1,
                    IC::kPcieOnly,
                    {{0, 1, "PIX"}, {0, 2, "PXB"}, {0, 4, "SYS"}, {6, 7, "PIX"}},
                    -1,
                    "14-27",
                    "mlx5_0",
                    0},
        FixtureCase{"p4d_a100",
                    "topo-aws-p4d-a100-nv12-gpunumaid.txt",
                    8,
                    0,
                    IC::kNvSwitch,
                    {{0, 7, "NV12"}},
                    0,
                    "24-47,72-95",
                    "",
                    0},
        FixtureCase{"dgx_a100_mlx5",
                    "topo-dgx-a100-mlx5-names.txt",
                    8,
                    12,
                    IC::kNvSwitch,
                    {{0, 1, "NV12"}, {2, 6, "NV12"}},
                    3,
                    "80-95,208-223",
                    "mlx5_0",
                    0},
        FixtureCase{"dgx1_microway",
                    "topo-dgx1-v100-microway.txt",
                    8,
                    4,
                    IC::kNvLinkMesh,
                    {{0, 1, "NV1"}, {0, 3, "NV2"}, {0, 5, "SYS"}, {3, 7, "NV1"}},
                    -1,
                    "20-39,60-79",
                    "mlx5_0",
                    0},
        FixtureCase{"dgx1_vastai",
                    "topo-dgx1-v100-vastai-580.txt",
                    8,
                    1,
                    IC::kNvLinkMesh,
                    {{0, 4, "NV2"}, {1, 5, "NV2"}, {4, 7, "NV2"}, {2, 7, "SYS"}},
                    0,
                    "20-39,60-79",
                    "mlx5_2",
                    0},
        FixtureCase{"gb200_4gpu",
                    "topo-gb200-4gpu-nv18-k8stestinfra371.txt",
                    4,
                    0,
                    IC::kNvSwitch,
                    {{0, 3, "NV18"}},
                    0,
                    "72-143",
                    "",
                    0},
        FixtureCase{"hgx_h100_no_leading_tab",
                    "topo-hgx-h100-12nics-580.txt",
                    8,
                    12,
                    IC::kNvSwitch,
                    {{0, 7, "NV18"}, {2, 5, "NV18"}},
                    0,
                    "56-111,168-223",
                    "mlx5_0",
                    0},
        // Captured raw on a real H200 (scripts/gpu-check.sh): terminal escapes in the
        // header.
        FixtureCase{"h200_vm_ansi_header",
                    "topo-1x-h200-vm-ansi-580.txt",
                    1,
                    0,
                    IC::kPcieOnly,
                    {},
                    0,
                    "0-15",
                    "",
                    0}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(FixtureCoverageTest, EveryTopoFixtureIsInTheTable) {
  // A new fixture must get a row above.
  int files = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(SourceDir() + "/testdata/nvidia-smi")) {
    std::string name = e.path().filename().string();
    if (StartsWith(name, "topo-")) ++files;
  }
  EXPECT_EQ(files, 14);
}

// Pasting variants of every fixture read to the same links and affinities.
std::string ExpandTabs(std::string_view text) {
  std::string out;
  int col = 0;
  for (char ch : text) {
    if (ch == '\t') {
      do {
        out += ' ';
        ++col;
      } while (col % 8 != 0);
    } else {
      out += ch;
      col = ch == '\n' ? 0 : col + 1;
    }
  }
  return out;
}

void ExpectSameTopology(const Topology& a, const Topology& b, const std::string& what) {
  ASSERT_EQ(a.gpu_count(), b.gpu_count()) << what;
  ASSERT_EQ(a.nics().size(), b.nics().size()) << what;
  for (int i = 0; i < a.gpu_count(); ++i) {
    EXPECT_EQ(a.gpu(i).numa_node, b.gpu(i).numa_node) << what << " GPU" << i;
    EXPECT_EQ(a.gpu(i).cpu_affinity, b.gpu(i).cpu_affinity) << what << " GPU" << i;
    for (int j = 0; j < a.gpu_count(); ++j) {
      EXPECT_EQ(a.link(i, j), b.link(i, j)) << what << " " << i << "," << j;
    }
  }
  for (size_t k = 0; k < a.nics().size(); ++k) {
    EXPECT_EQ(a.nics()[k].gpu_paths, b.nics()[k].gpu_paths) << what;
    EXPECT_EQ(a.nics()[k].device, b.nics()[k].device) << what;
  }
}

class VariantTest : public ::testing::TestWithParam<const char*> {};

TEST_P(VariantTest, ExpandedTabsCrlfAndCollapsedSpacesReadTheSame) {
  std::string text = Fixture(GetParam());
  Result<Topology> base = ParseTopoMatrix(text, "base");
  ASSERT_TRUE(base.ok());
  std::string expanded = ExpandTabs(text);
  Result<Topology> e = ParseTopoMatrix(expanded, "expanded");
  ASSERT_TRUE(e.ok());
  ExpectSameTopology(*base, *e, "tabs expanded");
  Result<Topology> crlf =
      ParseTopoMatrix(std::regex_replace(text, std::regex("\n"), "\r\n"), "crlf");
  ASSERT_TRUE(crlf.ok());
  ExpectSameTopology(*base, *crlf, "CRLF");
  // Runs of spaces collapsed to one (a markdown renderer): links still read.
  std::string collapsed = std::regex_replace(expanded, std::regex(" +"), " ");
  Result<Topology> c = ParseTopoMatrix(collapsed, "collapsed");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->gpu_count(), base->gpu_count());
  for (int i = 0; i < base->gpu_count(); ++i) {
    for (int j = 0; j < base->gpu_count(); ++j) {
      EXPECT_EQ(base->link(i, j), c->link(i, j)) << "collapsed " << i << "," << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    SharedFixtures, VariantTest,
    ::testing::Values("topo-2x-a100-pcie-della-sys.txt", "topo-4x-h100-nv6-nccl1617.txt",
                      "topo-4x-l40s-nics-missalignment106.txt",
                      "topo-8x-pcie-pix-pxb-quda669.txt",
                      "topo-aws-p4d-a100-nv12-gpunumaid.txt",
                      "topo-dgx-a100-mlx5-names.txt", "topo-dgx1-v100-microway.txt",
                      "topo-dgx1-v100-vastai-580.txt", "topo-hgx-h100-12nics-580.txt"));

// Broken or odd inputs: a finding naming the row and column, or a clear error.
struct BrokenCase {
  const char* name;
  const char* text;
  bool parses;
  const char* code;     // expected finding code ("" when an error is expected)
  const char* mention;  // substring of the finding / error message
};

class BrokenTest : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenTest, ReportsClearly) {
  const BrokenCase& c = GetParam();
  Result<Topology> r = ParseTopoMatrix(c.text, "in.txt");
  ASSERT_EQ(r.ok(), c.parses) << (r.ok() ? "parsed" : r.status().ToString());
  if (!r.ok()) {
    EXPECT_NE(r.status().message().find(c.mention), std::string::npos)
        << r.status().message();
    return;
  }
  if (std::string(c.code).empty()) {
    EXPECT_TRUE(CheckTopology(*r).empty());
    return;
  }
  bool found = false;
  for (const Finding& f : CheckTopology(*r)) {
    if (f.code == c.code && f.message.find(c.mention) != std::string::npos) found = true;
  }
  EXPECT_TRUE(found) << "no finding " << c.code << " mentioning '" << c.mention << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BrokenTest,
    ::testing::Values(
        BrokenCase{"empty", "", false, "", "no `nvidia-smi topo -m` matrix"},
        BrokenCase{"garbage", "hello world\n\x01\x02\xff\n", false, "", "no `nvidia-smi"},
        BrokenCase{"bad_cell", "\tGPU0\tGPU1\nGPU0\t X \tNVX\nGPU1\tNV4\t X \n", true,
                   "malformed-cell", "row GPU0, column GPU1: 'NVX'"},
        BrokenCase{"short_row",
                   "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV4\nGPU1\tNV4\t X \tPHB\n"
                   "GPU2\tPHB\tPHB\t X \n",
                   true, "malformed-row", "row GPU0, column GPU2: row ends early"},
        BrokenCase{"missing_row", "\tGPU0\tGPU1\nGPU0\t X \tPIX\n", true, "gpu-missing",
                   "no row for GPU1"},
        BrokenCase{"x_off_diagonal", "\tGPU0\tGPU1\nGPU0\t X \t X \nGPU1\tPIX\t X \n",
                   true, "malformed-cell", "'X' (self) off the diagonal"},
        BrokenCase{"asymmetric", "\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tPIX\t X \n", true,
                   "asymmetric", "GPU0->GPU1 is NV2"},
        BrokenCase{
            "bad_cpu_affinity",
            "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPIX\t0-x\nGPU1\tPIX\t X \t0-3\n",
            true, "malformed-cell", "column CPU Affinity: '0-x'"},
        BrokenCase{"pcie_gpu_among_nvlink",
                   "\tGPU0\tGPU1\tGPU2\tGPU3\n"
                   "GPU0\t X \tNV18\tNV18\tSYS\nGPU1\tNV18\t X \tNV18\tSYS\n"
                   "GPU2\tNV18\tNV18\t X \tPHB\nGPU3\tSYS\tSYS\tPHB\t X \n",
                   true, "pcie-gpu", "GPU 3: PCIe links only"},
        BrokenCase{"degraded_pair",
                   "\tGPU0\tGPU1\tGPU2\tGPU3\n"
                   "GPU0\t X \tNV18\tNV18\tNV18\nGPU1\tNV18\t X \tNV18\tNV17\n"
                   "GPU2\tNV18\tNV18\t X \tNV18\nGPU3\tNV18\tNV17\tNV18\t X \n",
                   true, "degraded-link", "GPU1-GPU3 has NV17"},
        BrokenCase{"duplicate_row",
                   "\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \nGPU1\tPIX\t X \n", true,
                   "malformed-row", "row GPU1 appears twice"},
        BrokenCase{
            "old_soc_legend",
            "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t8-15\n"
            "\nLegend:\n\n  X   = Self\n  SOC  = Connection traversing PCIe as well "
            "as the SMP link between CPU sockets(e.g. QPI)\n",
            true, "", ""}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(MatrixTest, SocMeansSys) {
  Result<Topology> r = ParseTopoMatrix(
      "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t8-15\n", "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->link(0, 1).pcie, PciePath::kSys);
  EXPECT_EQ(r->gpu(1).cpu_affinity, "8-15");
}

TEST(MatrixTest, PromptAndFenceLinesAreSkipped) {
  Result<Topology> r = ParseTopoMatrix(
      "$ nvidia-smi topo -m\n```\n\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n```\n",
      "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->link(1, 0).nvlinks, 4);
  EXPECT_TRUE(r->read_findings().empty());
}

TEST(MatrixTest, MissingAttributeValuePlacedByColumn) {
  // NUMA Affinity missing on GPU1 (spaces only): N/A must not land in NUMA Affinity.
  std::string text =
      "        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
      "GPU0     X      PIX     0-7     0               N/A\n"
      "GPU1    PIX      X      8-15                    N/A\n";
  Result<Topology> r = ParseTopoMatrix(text, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gpu(0).numa_node, 0);
  EXPECT_EQ(r->gpu(1).cpu_affinity, "8-15");
  EXPECT_EQ(r->gpu(1).numa_node, -1);
}

TEST(MatrixTest, SixteenGpusAndOddNicNames) {
  std::string text = "\t";
  for (int i = 0; i < 16; ++i) text += "GPU" + std::to_string(i) + "\t";
  text += "ib_bond0\tCPU Affinity\n";
  for (int i = 0; i < 16; ++i) {
    text += "GPU" + std::to_string(i);
    for (int j = 0; j < 16; ++j) text += i == j ? "\t X " : "\tNV6";
    text += i < 8 ? "\tNODE\t0-23\n" : "\tSYS\t24-47\n";
  }
  text += "ib_bond0";
  for (int j = 0; j < 16; ++j) text += j < 8 ? "\tNODE" : "\tSYS";
  text += "\t X \n";
  Result<Topology> r = ParseTopoMatrix(text, "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gpu_count(), 16);
  ASSERT_EQ(r->nics().size(), 1u);
  EXPECT_EQ(r->nics()[0].name, "ib_bond0");
  EXPECT_EQ(r->nics()[0].gpu_paths[9], PciePath::kSys);
  EXPECT_EQ(r->gpu(15).cpu_affinity, "24-47");
  EXPECT_TRUE(CheckTopology(*r).empty());
}

// ---- nvidia-smi -L and --query-gpu ----

TEST(GpuListTest, ReadsRhelAiVm) {
  Result<std::vector<ListedGpu>> r =
      ParseGpuList(Fixture("list-gpus-8x-h100-rhelai-vm.txt"), "L");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 8u);
  EXPECT_EQ((*r)[7].index, 7);
  EXPECT_EQ((*r)[0].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ((*r)[0].uuid, "GPU-c7a0294c-c2c2-5476-438c-fb468eaa223b");
}

TEST(GpuListTest, ReadsMigChildren) {
  Result<std::vector<ListedGpu>> r =
      ParseGpuList(Fixture("list-gpus-a100-pcie-mig.txt"), "L");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].model, "NVIDIA A100 80GB PCIe");
  const std::vector<MigDevice>& mig = (*r)[0].mig_devices;
  ASSERT_EQ(mig.size(), 4u);
  EXPECT_EQ(mig[0].profile, "3g.40gb");
  EXPECT_EQ(mig[0].uuid, "MIG-d771d938-b556-4f9d-b742-2dd26b864023");
  EXPECT_EQ(mig[0].gpu_instance, -1);  // not in -L's output
  EXPECT_EQ(mig[3].profile, "1g.10gb");
  EXPECT_EQ(mig[3].uuid, "MIG-a5b1e9ac-1c96-4ca0-b57c-53878e7531dc");
  EXPECT_EQ(MigLayoutText(mig), "3g.40gb, 2g.20gb, 1g.10gb x2");
}

// The MIG lines of other drivers: R450/R460 named the instance ids in the UUID; a line
// cut before its UUID keeps the profile.
TEST(GpuListTest, MigLineVariants) {
  Result<std::vector<ListedGpu>> r = ParseGpuList(
      "GPU 0: A100-SXM4-40GB (UUID: GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2)\n"
      "  MIG 1g.5gb Device 0: (UUID: MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2/7/0)\n"
      "  MIG 1c.3g.20gb Device 1: (UUID: "
      "MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2/2/1)\n"
      "  MIG 2g.10gb Device 2:\n",
      "L");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<MigDevice>& mig = (*r)[0].mig_devices;
  ASSERT_EQ(mig.size(), 3u);
  EXPECT_EQ(
      mig[0],
      (MigDevice{"1g.5gb", "MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2/7/0", 7, 0, 0}));
  EXPECT_EQ(mig[1].profile, "1c.3g.20gb");
  EXPECT_EQ(mig[1].gpu_instance, 2);
  EXPECT_EQ(mig[1].compute_instance, 1);
  EXPECT_EQ(mig[2], (MigDevice{"2g.10gb", "", -1, -1, 0}));
}

TEST(MergeTest, MigListMakesMigGpus) {
  Result<std::vector<ListedGpu>> l =
      ParseGpuList(Fixture("list-gpus-a100-pcie-mig.txt"), "L");
  ASSERT_TRUE(l.ok());
  Topology t;
  MergeGpuList(t, *l, "L");
  ASSERT_EQ(t.gpu_count(), 1);
  EXPECT_TRUE(t.gpu(0).mig_enabled);
  EXPECT_EQ(t.gpu(0).mig_devices, (*l)[0].mig_devices);
  ASSERT_EQ(t.read_findings().size(), 1u);
  EXPECT_EQ(t.read_findings()[0].message,
            "L: GPU0 is split into 4 MIG instances (3g.40gb, 2g.20gb, 1g.10gb x2)");
}

TEST(GpuListTest, RejectsGarbageWithLine) {
  Result<std::vector<ListedGpu>> r = ParseGpuList("GPU 0: A (UUID: GPU-1)\nfoo\n", "L");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("L:2"), std::string::npos);
}

TEST(QueryGpuTest, ReadsA800WithHeaderAndUnits) {
  Result<std::vector<QueriedGpu>> r =
      ParseQueryGpuCsv(Fixture("query-gpu-csv-a800.txt"), "q");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 8u);
  EXPECT_EQ((*r)[3].index, 3);
  EXPECT_EQ((*r)[3].model, "NVIDIA A800-SXM4-80GB");
  EXPECT_EQ((*r)[3].memory_mib, 81920);
}

TEST(QueryGpuTest, ReadsBriefFieldsWithoutHeader) {
  Result<std::vector<QueriedGpu>> r = ParseQueryGpuCsv(
      "0, GPU-aaa, NVIDIA H100 80GB HBM3, 81559, 00000000:18:00.0\n"
      "1, GPU-bbb, NVIDIA H100 80GB HBM3, 81559, 00000000:2A:00.0\n",
      "q");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[1].uuid, "GPU-bbb");
  EXPECT_EQ((*r)[1].pci_bus_id, "00000000:2A:00.0");
  EXPECT_EQ((*r)[1].memory_mib, 81559);
}

// The brief's exact query, captured on a real H200: with header and units (--format=csv)
// and as hachi runs it (noheader,nounits); both read to the same GPU, which merges into
// the matrix read from the same machine.
TEST(QueryGpuTest, ReadsRealH200BothFormats) {
  for (const char* file :
       {"query-gpu-csv-1x-h200-vm.txt", "query-gpu-noheader-1x-h200-vm.txt"}) {
    Result<std::vector<QueriedGpu>> r = ParseQueryGpuCsv(Fixture(file), file);
    ASSERT_TRUE(r.ok()) << file << ": " << r.status().ToString();
    ASSERT_EQ(r->size(), 1u) << file;
    EXPECT_EQ((*r)[0].index, 0);
    EXPECT_EQ((*r)[0].uuid, "GPU-b419a1e4-4ddf-ba69-2493-c968fd0611a3");
    EXPECT_EQ((*r)[0].model, "NVIDIA H200");
    EXPECT_EQ((*r)[0].memory_mib, 143771);
    EXPECT_EQ((*r)[0].pci_bus_id, "00000000:00:06.0");
  }
  Result<Topology> t = ParseTopoMatrix(Fixture("topo-1x-h200-vm-ansi-580.txt"), "m");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Result<std::vector<QueriedGpu>> q =
      ParseQueryGpuCsv(Fixture("query-gpu-noheader-1x-h200-vm.txt"), "q");
  ASSERT_TRUE(q.ok());
  MergeQueriedGpus(*t, *q, "q");
  EXPECT_EQ(t->gpu(0).model, "NVIDIA H200");
  EXPECT_TRUE(CheckTopology(*t).empty());
  Result<std::vector<ListedGpu>> l =
      ParseGpuList(Fixture("list-gpus-1x-h200-vm.txt"), "L");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].uuid, (*q)[0].uuid);
}

TEST(MatrixTest, TerminalEscapesAnywhereAreIgnored) {
  // Underline around the header (as nvidia-smi 580 prints it), colour in a cell, and a
  // truncated escape at the very end: the same links as the plain text.
  Result<Topology> r = ParseTopoMatrix(
      "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\x1b[0m\n"
      "GPU0\t X \t\x1b[1;32mNV4\x1b[0m\t0-7\n"
      "GPU1\tNV4\t X \t0-7\n\x1b[",
      "x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpu_count(), 2);
  EXPECT_EQ(r->link(0, 1).Label(), "NV4");
  EXPECT_EQ(r->gpu(1).cpu_affinity, "0-7");
}

TEST(QueryGpuTest, ErrorsNameLineAndField) {
  Result<std::vector<QueriedGpu>> r =
      ParseQueryGpuCsv("0, GPU-a, X, lots, 0000:01:00.0\n", "q");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("q:1, field memory.total"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(ParseQueryGpuCsv("0, GPU-a\n", "q").ok());
}

// fuzz_nvidia_smi: rows without an index column were numbered past GPU 63
// (fuzz/corpus/fuzz_nvidia_smi/crash-query-65-rows-without-index.txt).
TEST(QueryGpuTest, AtMost64RowsWithoutAnIndexColumn) {
  std::string csv = "name, uuid\n";
  for (int i = 0; i < 64; ++i) csv += "H100, GPU-" + std::to_string(i) + "\n";
  Result<std::vector<QueriedGpu>> ok = ParseQueryGpuCsv(csv, "q");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->back().index, 63);
  Result<std::vector<QueriedGpu>> r = ParseQueryGpuCsv(csv + "H100, GPU-64\n", "q");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "q:66: more than 64 GPUs");
}

TEST(MergeTest, ListMergesAndCountMismatchIsAnError) {
  Result<Topology> t = ParseTopoMatrix(Fixture("topo-hgx-h100-12nics-580.txt"), "m");
  ASSERT_TRUE(t.ok());
  Result<std::vector<ListedGpu>> l =
      ParseGpuList(Fixture("list-gpus-8x-h100-rhelai-vm.txt"), "L");
  ASSERT_TRUE(l.ok());
  MergeGpuList(*t, *l, "L");
  EXPECT_EQ(t->gpu(5).uuid, "GPU-4a360bd8-44cd-43cb-9dc8-1b47ce52e162");
  EXPECT_TRUE(CheckTopology(*t).empty());

  std::vector<ListedGpu> seven(l->begin(), l->end() - 1);
  Result<Topology> t2 = ParseTopoMatrix(Fixture("topo-hgx-h100-12nics-580.txt"), "m");
  MergeGpuList(*t2, seven, "L");
  std::vector<Finding> f = CheckTopology(*t2);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].code, "gpu-count-mismatch");
  EXPECT_EQ(f[0].severity, Severity::kError);
}

TEST(MergeTest, ListAloneMakesGpus) {
  Topology t;
  Result<std::vector<QueriedGpu>> q =
      ParseQueryGpuCsv(Fixture("query-gpu-csv-a800.txt"), "q");
  ASSERT_TRUE(q.ok());
  MergeQueriedGpus(t, *q, "q");
  EXPECT_EQ(t.gpu_count(), 8);
  EXPECT_EQ(t.gpu(7).memory_mib, 81920);
}

TEST(CheckTest, ExpectedCountFlagsMissingGpu) {
  Result<Topology> t =
      ParseTopoMatrix(Fixture("topo-4x-l40s-nics-missalignment106.txt"), "m");
  ASSERT_TRUE(t.ok());
  CheckOptions opts;
  opts.expected_gpus = 8;
  std::vector<Finding> f = CheckTopology(*t, opts);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].code, "gpu-count-mismatch");
  EXPECT_EQ(WorstSeverity(f), Severity::kError);
}

TEST(MatrixTest, NicsRevealSwitchPeersUnderNvLink) {
  Result<Topology> r = ParseTopoMatrix(Fixture("topo-dgx1-v100-microway.txt"), "m");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->link(0, 1).pcie, PciePath::kPix);  // both PIX to mlx5_0
  EXPECT_EQ(r->link(0, 1).Label(), "NV1");        // the NVLink still shows
  EXPECT_EQ(r->link(0, 2).pcie, PciePath::kUnknown);
  TopologyFacts f = Analyze(*r);
  ASSERT_EQ(f.pcie_groups.size(), 4u);
  EXPECT_EQ(f.pcie_groups[3].ToString(), "6,7");
  // HGX H100: each GPU has its own PIX NIC, so nothing is inferred.
  Result<Topology> h = ParseTopoMatrix(Fixture("topo-hgx-h100-12nics-580.txt"), "h");
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(Analyze(*h).pcie_groups.empty());
}

TEST(FingerprintTest, IgnoresUuidsButNotLinks) {
  Result<Topology> a = ParseTopoMatrix(Fixture("topo-dgx1-v100-microway.txt"), "a");
  Result<Topology> b = ParseTopoMatrix(Fixture("topo-dgx1-v100-microway.txt"), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  b->mutable_gpu(0).uuid = "GPU-different";
  EXPECT_EQ(Fingerprint(*a), Fingerprint(*b));
  b->SetLink(0, 1, Link{2, PciePath::kUnknown});
  EXPECT_NE(Fingerprint(*a), Fingerprint(*b));
}

}  // namespace
}  // namespace hachi::topo
