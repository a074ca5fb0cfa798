#include "topo/topology_file.h"

#include <gtest/gtest.h>

#include <string>

#include "core/strings.h"
#include "core/testing/paths.h"
#include "topo/topology_testing.h"

namespace hachi::topo {
namespace {

// A valid 2-GPU file; error cases replace one piece of it.
std::string TwoGpus(const std::string& gpu1 = R"({"index": 1, "model": "M",
                        "memory_mib": 1024, "numa_node": 0})",
                    const std::string& links = R"({"matrix": [["X", "NV4"], ["NV4", "X"]],
                        "pcie_matrix": [["X", "PIX"], ["PIX", "X"]]})",
                    const std::string& extra = "") {
  return R"({"format": "hachi-topology/1", "name": "two", "gpus": [
      {"index": 0, "model": "M", "memory_mib": 1024, "numa_node": 0,
       "uuid": "GPU-0", "pci_bus_id": "00000000:18:00.0", "cpu_affinity": "0-7"},
      )" +
         gpu1 + R"(], "links": )" + links + extra + "}";
}

TEST(TopologyFileTest, ParsesAllFields) {
  Result<TopologyFile> f = ParseTopologyFile(
      TwoGpus(R"({"index": 1, "model": "M", "memory_mib": 1024, "numa_node": 1})",
              R"({"matrix": [["X", "NV4"], ["NV4", "X"]],
                  "pcie_matrix": [["X", "PIX"], ["PIX", "X"]]})",
              R"(, "notes": ["a fact"], "description": "d",
                 "nics": [{"name": "NIC0", "device": "mlx5_0", "gpu_paths": ["PIX", "SYS"]}])"),
      "two.json");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const Topology& t = f->topology;
  EXPECT_EQ(f->name, "two");
  EXPECT_EQ(f->description, "d");
  ASSERT_EQ(f->notes.size(), 1u);
  ASSERT_EQ(t.gpu_count(), 2);
  EXPECT_EQ(t.gpu(0).uuid, "GPU-0");
  EXPECT_EQ(t.gpu(0).pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(t.gpu(0).cpu_affinity, "0-7");
  EXPECT_EQ(t.gpu(1).numa_node, 1);
  EXPECT_EQ(t.gpu(1).memory_mib, 1024);
  EXPECT_EQ(t.link(0, 1), (Link{4, PciePath::kPix}));
  EXPECT_EQ(t.link(1, 0), (Link{4, PciePath::kPix}));
  ASSERT_EQ(t.nics().size(), 1u);
  EXPECT_EQ(t.nics()[0].device, "mlx5_0");
  EXPECT_EQ(t.nics()[0].gpu_paths[1], PciePath::kSys);
  EXPECT_EQ(t.source(), "topology file two.json");
}

TEST(TopologyFileTest, CompactForms) {
  struct Case {
    std::string name, links;
    Link want;
  };
  const Case cases[] = {
      {"nvswitch_and_pcie",
       R"({"nvswitch": {"nvlinks": 18},
          "pcie_matrix": [["X", "SYS"], ["SYS", "X"]]})",
       {18, PciePath::kSys}},
      {"nvswitch_only", R"({"nvswitch": {"nvlinks": 12}})", {12, PciePath::kUnknown}},
      {"pcie_only",
       R"({"pcie_matrix": [["X", "NODE"], ["NODE", "X"]]})",
       {0, PciePath::kNode}},
      {"matrix_pcie_labels",
       R"({"matrix": [["X", "PHB"], ["PHB", "X"]]})",
       {0, PciePath::kPhb}},
      {"matrix_soc_is_sys",
       R"({"matrix": [["X", "SOC"], ["SOC", "X"]]})",
       {0, PciePath::kSys}},
      {"unknown_cell",
       R"({"matrix": [["X", "?"], ["?", "X"]]})",
       {0, PciePath::kUnknown}},
      {"unknown_in_matrix_filled_by_pcie",
       R"({"matrix": [["X", "?"], ["?", "X"]],
          "pcie_matrix": [["X", "PXB"], ["PXB", "X"]]})",
       {0, PciePath::kPxb}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Topology> t = ParseTopologyJson(
        TwoGpus(R"({"index": 1, "model": "M", "memory_mib": 1024, "numa_node": 0})",
                c.links),
        "f");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->link(0, 1), c.want);
  }
}

TEST(TopologyFileTest, Errors) {
  const std::string kGpu1 =
      R"({"index": 1, "model": "M", "memory_mib": 1024, "numa_node": 0})";
  const std::string kLinks = R"({"matrix": [["X", "NV4"], ["NV4", "X"]]})";
  struct Case {
    std::string name, text, want;  // `want` must appear in the message
  };
  const Case cases[] = {
      {"not_json", "{", "f: invalid JSON: "},
      {"not_object", "[]", "f: expected a JSON object, got array"},
      {"no_format", R"({"gpus": []})", "format: missing"},
      {"wrong_format", R"({"format": "hachi-topology/2"})",
       "format: expected 'hachi-topology/1', got 'hachi-topology/2'"},
      {"unknown_top_key", TwoGpus(kGpu1, kLinks, R"(, "gpu": 1)"), "gpu: unknown key"},
      {"notes_not_strings", TwoGpus(kGpu1, kLinks, R"(, "notes": ["a", 2])"),
       "notes[1]: expected a string, got number"},
      {"no_gpus", R"({"format": "hachi-topology/1", "links": {}})", "gpus: missing"},
      {"empty_gpus", R"({"format": "hachi-topology/1", "gpus": []})",
       "gpus: expected 1 to 64 GPUs, got 0"},
      {"numa_not_int",
       TwoGpus(R"({"index": 1, "model": "M", "memory_mib": 1, "numa_node": "0"})",
               kLinks),
       "gpus[1].numa_node: expected an integer, got string"},
      {"numa_float",
       TwoGpus(R"({"index": 1, "model": "M", "memory_mib": 1, "numa_node": 1.5})",
               kLinks),
       "gpus[1].numa_node: expected an integer, got number"},
      {"memory_negative",
       TwoGpus(R"({"index": 1, "model": "M", "memory_mib": -1, "numa_node": 0})", kLinks),
       "gpus[1].memory_mib: -1 is out of range"},
      {"missing_model",
       TwoGpus(R"({"index": 1, "memory_mib": 1, "numa_node": 0})", kLinks),
       "gpus[1].model: missing"},
      {"missing_numa", TwoGpus(R"({"index": 1, "model": "M", "memory_mib": 1})", kLinks),
       "gpus[1].numa_node: missing"},
      {"index_out_of_order",
       TwoGpus(R"({"index": 0, "model": "M", "memory_mib": 1, "numa_node": 0})", kLinks),
       "gpus[1].index: expected 1"},
      {"unknown_gpu_key",
       TwoGpus(
           R"({"index": 1, "model": "M", "memory_mib": 1, "numa_node": 0, "numa": 1})",
           kLinks),
       "gpus[1].numa: unknown key"},
      {"bad_cpu_affinity",
       TwoGpus(R"({"index": 1, "model": "M", "memory_mib": 1, "numa_node": 0,
                   "cpu_affinity": "3-1"})",
               kLinks),
       "gpus[1].cpu_affinity: bad CPU list item '3-1'"},
      {"gpu_not_object", TwoGpus("7", kLinks), "gpus[1]: expected an object, got number"},
      {"no_links", R"({"format": "hachi-topology/1", "gpus": [
           {"index": 0, "model": "M", "memory_mib": 1, "numa_node": 0}]})",
       "links: missing"},
      {"empty_links", TwoGpus(kGpu1, "{}"), "links: expected at least one of"},
      {"matrix_and_nvswitch",
       TwoGpus(kGpu1,
               R"({"matrix": [["X", "NV4"], ["NV4", "X"]], "nvswitch": {"nvlinks": 1}})"),
       "links: give either matrix or nvswitch"},
      {"bad_cell", TwoGpus(kGpu1, R"({"matrix": [["X", "NV"], ["NV4", "X"]]})"),
       "links.matrix[0][1]: 'NV' is not a link"},
      {"bad_word", TwoGpus(kGpu1, R"({"matrix": [["X", "NVLINK"], ["NV4", "X"]]})"),
       "links.matrix[0][1]: 'NVLINK' is not a link"},
      {"cell_not_string", TwoGpus(kGpu1, R"({"matrix": [["X", 4], ["NV4", "X"]]})"),
       "links.matrix[0][1]: expected a string, got number"},
      {"diagonal_not_x", TwoGpus(kGpu1, R"({"matrix": [["X", "NV4"], ["NV4", "PIX"]]})"),
       "links.matrix[1][1]: expected 'X' on the diagonal"},
      {"x_off_diagonal", TwoGpus(kGpu1, R"({"matrix": [["X", "X"], ["NV4", "X"]]})"),
       "links.matrix[0][1]: 'X' is only allowed on the diagonal"},
      {"too_few_rows", TwoGpus(kGpu1, R"({"matrix": [["X", "NV4"]]})"),
       "links.matrix: expected 2 rows (one per GPU), got 1"},
      {"row_too_long",
       TwoGpus(kGpu1, R"({"matrix": [["X", "NV4", "SYS"], ["NV4", "X"]]})"),
       "links.matrix[0]: expected 2 cells (one per GPU), got 3"},
      {"nv_in_pcie_matrix",
       TwoGpus(kGpu1, R"({"pcie_matrix": [["X", "NV2"], ["NV2", "X"]]})"),
       "links.pcie_matrix[0][1]: 'NV2' is an NVLink label"},
      {"contradiction", TwoGpus(kGpu1, R"({"matrix": [["X", "SYS"], ["SYS", "X"]],
                          "pcie_matrix": [["X", "PIX"], ["PIX", "X"]]})"),
       "links.pcie_matrix[0][1]: 'PIX' contradicts links.matrix[0][1] ('SYS')"},
      {"nvswitch_zero", TwoGpus(kGpu1, R"({"nvswitch": {"nvlinks": 0}})"),
       "links.nvswitch.nvlinks: 0 is out of range (1..64)"},
      {"unknown_links_key", TwoGpus(kGpu1, R"({"nvlink": {}})"),
       "links.nvlink: unknown key"},
      {"nic_short",
       TwoGpus(kGpu1, kLinks, R"(, "nics": [{"name": "NIC0", "gpu_paths": ["PIX"]}])"),
       "nics[0].gpu_paths: expected 2 labels (one per GPU), got 1"},
      {"nic_nvlink",
       TwoGpus(kGpu1, kLinks,
               R"(, "nics": [{"name": "n", "gpu_paths": ["NV1", "PIX"]}])"),
       "nics[0].gpu_paths[0]: 'NV1' is an NVLink label"},
      {"nic_no_name",
       TwoGpus(kGpu1, kLinks, R"(, "nics": [{"gpu_paths": ["PIX", "PIX"]}])"),
       "nics[0].name: missing"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Topology> t = ParseTopologyJson(c.text, "f");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.want), std::string::npos)
        << "message: " << t.status().message();
  }
}

TEST(TopologyFileTest, TooManyGpus) {
  std::string gpus;
  for (int i = 0; i < 65; ++i) {
    gpus += (i ? "," : "") + std::string(R"({"index": )") + std::to_string(i) +
            R"(, "model": "M", "memory_mib": 1, "numa_node": 0})";
  }
  Result<Topology> t =
      ParseTopologyJson(R"({"format": "hachi-topology/1", "gpus": [)" + gpus + "]}", "f");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("expected 1 to 64 GPUs, got 65"),
            std::string::npos);
}

TEST(TopologyFileTest, RoundTripsMixedLinks) {
  Topology t(3);
  t.mutable_gpu(0).model = "A \"quoted\" GPU";
  t.mutable_gpu(1).memory_mib = 24564;
  t.mutable_gpu(2).numa_node = 1;
  t.mutable_gpu(2).cpu_affinity = "8-15";
  t.SetSymmetricLink(0, 1, {4, PciePath::kPix});
  t.SetSymmetricLink(0, 2, {0, PciePath::kSys});
  t.SetLink(1, 2, {2, PciePath::kUnknown});  // asymmetric on purpose: kept as written
  t.SetLink(2, 1, {0, PciePath::kSys});
  t.mutable_nics().push_back({"NIC0", "mlx5_0", {PciePath::kPix, PciePath::kPxb}});
  std::string text = TopologyToJson(t);
  Result<Topology> back = ParseTopologyJson(text, "roundtrip");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  // The NIC row was short; the file pads it with "?".
  EXPECT_EQ(back->nics()[0].gpu_paths[2], PciePath::kUnknown);
  t.mutable_nics()[0].gpu_paths.push_back(PciePath::kUnknown);
  EXPECT_TRUE(SameTopology(t, *back)) << text;
  EXPECT_EQ(TopologyToJson(*back), text);
}

TEST(TopologyFileTest, RoundTripsFileFields) {
  TopologyFile f;
  f.name = "n";
  f.description = "d";
  f.notes = {"one", "two"};
  f.topology = Topology(1);
  f.topology.mutable_gpu(0).model = "M";
  std::string text = TopologyFileToJson(f);
  Result<TopologyFile> back = ParseTopologyFile(text, "x");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, "n");
  EXPECT_EQ(back->notes, f.notes);
  EXPECT_EQ(TopologyFileToJson(*back), text);
}

// A MIG GPU keeps its layout through the file; a GPU in MIG mode without instances
// too, and a GPU without MIG writes nothing of it (files of older nodes unchanged).
TEST(TopologyFileTest, RoundTripsMigDevices) {
  Topology t(3);
  Gpu& g0 = t.mutable_gpu(0);
  g0.model = "NVIDIA A100 80GB PCIe";
  g0.mig_enabled = true;
  g0.mig_devices = {
      {"3g.40gb", "MIG-d771d938-b556-4f9d-b742-2dd26b864023", 2, 0, 40192},
      {"1g.10gb", "MIG-761ea9d1-82ac-41cb-9e19-d3593973f144", 9, 0, 9728},
      {"1c.2g.20gb", "", -1, -1, 0},  // only what nvidia-smi -L says
  };
  t.mutable_gpu(1).mig_enabled = true;
  const std::string text = TopologyToJson(t);
  Result<Topology> back = ParseTopologyJson(text, "roundtrip");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  EXPECT_TRUE(SameTopology(t, *back)) << text;
  EXPECT_EQ(TopologyToJson(*back), text);
  EXPECT_TRUE(back->gpu(1).mig_enabled);
  EXPECT_TRUE(back->gpu(1).mig_devices.empty());
  EXPECT_FALSE(back->gpu(2).mig_enabled);
  EXPECT_EQ(text.find("mig", text.find("\"index\": 2")), std::string::npos) << text;
  EXPECT_EQ(back->gpu(0).mig_devices[0].slices(), 3);
  EXPECT_EQ(back->gpu(0).mig_devices[2].slices(), 1);
  EXPECT_EQ(MigLayoutText(back->gpu(0).mig_devices), "3g.40gb, 1g.10gb, 1c.2g.20gb");
}

TEST(TopologyFileTest, MigErrors) {
  const std::string kLinks = R"({"matrix": [["X", "NV4"], ["NV4", "X"]]})";
  auto gpu1 = [](const std::string& mig) {
    return R"({"index": 1, "model": "M", "memory_mib": 1, "numa_node": 0, )" + mig + "}";
  };
  struct Case {
    std::string name, mig, want;
  };
  const Case cases[] = {
      {"devices_without_mode", R"("mig_devices": [])",
       "gpus[1].mig_devices: given for a GPU without \"mig_enabled\": true"},
      {"mode_not_bool", R"("mig_enabled": 1)",
       "gpus[1].mig_enabled: expected true or false"},
      {"no_profile", R"("mig_enabled": true, "mig_devices": [{"uuid": "MIG-1"}])",
       "gpus[1].mig_devices[0].profile: missing"},
      {"unknown_key",
       R"("mig_enabled": true, "mig_devices": [{"profile": "1g.10gb", "gi": 1}])",
       "gpus[1].mig_devices[0].gi: unknown key"},
      {"negative_memory",
       R"("mig_enabled": true, "mig_devices": [{"profile": "1g.10gb", "memory_mib": -2}])",
       "gpus[1].mig_devices[0].memory_mib: -2 is out of range"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Topology> t = ParseTopologyJson(TwoGpus(gpu1(c.mig), kLinks), "f");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(c.want), std::string::npos)
        << "message: " << t.status().message();
  }
}

TEST(MigDeviceTest, SlicesFromTheProfile) {
  const std::pair<const char*, int> cases[] = {
      {"1g.10gb", 1},    {"3g.40gb", 3}, {"7g.80gb", 7}, {"1g.20gb+me", 1},
      {"2c.4g.40gb", 2}, {"", 0},        {"MIG", 0},     {"g.5gb", 0}};
  for (const auto& [profile, slices] : cases) {
    MigDevice m;
    m.profile = profile;
    EXPECT_EQ(m.slices(), slices) << profile;
  }
  EXPECT_EQ(MigLayoutText({}), "no instances");
  std::vector<MigDevice> seven(7, MigDevice{"1g.10gb", "", -1, -1, 0});
  EXPECT_EQ(MigLayoutText(seven), "1g.10gb x7");
}

// The full example in docs/topology-format.md must stay valid.
TEST(TopologyFileTest, DocumentedExampleParses) {
  std::string doc =
      ReadFile(SourceDir() + "/docs/topology-format.md", nullptr).value_or("");
  size_t begin = doc.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  begin += 8;
  size_t end = doc.find("```", begin);
  Result<TopologyFile> f = ParseTopologyFile(doc.substr(begin, end - begin), "doc");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->topology.gpu_count(), 8);
  EXPECT_EQ(f->topology.link(0, 1), (Link{4, PciePath::kPix}));
  EXPECT_EQ(f->topology.link(1, 2), (Link{0, PciePath::kNode}));
}

TEST(TopologyFileTest, ReadMissingFileIsNotFound) {
  Result<TopologyFile> f = ReadTopologyFile("/nonexistent/topology.json");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hachi::topo
