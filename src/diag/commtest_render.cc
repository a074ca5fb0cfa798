// diag/commtest.h's renderers: a table for people and one JSON object for tools (the
// burn-in gate reads its `checks` array).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "diag/commtest.h"

namespace hachi::diag {
namespace {

std::string Cell(const Figure& f) {
  if (f.failed()) return "failed";
  char buf[48];
  if (f.expected > 0) {
    std::snprintf(buf, sizeof(buf), "%.1f (%.0f%%)", f.gbps, f.ratio() * 100);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f", f.gbps);
  }
  return buf;
}

nlohmann::json FigureJson(const Figure& f) {
  nlohmann::json j = {{"gbps", f.gbps}};
  if (f.expected > 0) {
    j["expected_gbps"] = f.expected;
    j["ratio"] = f.ratio();
  }
  if (f.failed()) j["error"] = f.error;
  return j;
}

}  // namespace

std::string RenderCommtestText(const CommtestReport& r) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line),
                "CUDA driver %d.%d, %lld MiB per copy, threshold %.0f%% of expected\n",
                r.driver_version / 1000, r.driver_version % 1000 / 10,
                static_cast<long long>(r.size_bytes >> 20), r.threshold * 100);
  out += line;
  if (!r.expectations_note.empty()) out += r.expectations_note + "\n";
  out += "\nGB/s (% of expected)\n";
  std::snprintf(line, sizeof(line), "%-5s %-18s %-18s %-18s %-18s\n", "GPU", "host->dev",
                "dev->host", "dev->dev", "all peers");
  out += line;
  for (const GpuResult& g : r.gpus) {
    std::snprintf(line, sizeof(line), "%-5d %-18s %-18s %-18s %-18s\n", g.index,
                  Cell(g.h2d).c_str(), Cell(g.d2h).c_str(), Cell(g.d2d).c_str(),
                  Cell(g.all_pairs).c_str());
    out += line;
  }
  if (!r.pairs.empty()) {
    std::snprintf(line, sizeof(line), "\n%-6s %-5s %-4s %-18s %-18s %-18s %s\n", "pair",
                  "link", "p2p", "a->b", "b->a", "bidirectional", "latency");
    out += line;
    for (const PairResult& p : r.pairs) {
      char lat[24];
      std::snprintf(lat, sizeof(lat), "%.1f us", p.latency_us);
      std::string pair = std::to_string(p.a) + "-" + std::to_string(p.b);
      std::snprintf(line, sizeof(line), "%-6s %-5s %-4s %-18s %-18s %-18s %s\n",
                    pair.c_str(), p.link.c_str(),
                    p.p2p_ab && p.p2p_ba ? "yes" : (p.p2p_ab || p.p2p_ba ? "one" : "no"),
                    Cell(p.ab).c_str(), Cell(p.ba).c_str(), Cell(p.bidir).c_str(), lat);
      out += line;
    }
  }
  int flagged = 0;
  std::string items;
  for (const CheckItem& c : r.checks) {
    if (c.status == CheckStatus::kOk) continue;
    ++flagged;
    items += std::string("  ") + CheckStatusName(c.status) + " " + c.check + ": " +
             c.evidence + "\n";
    if (!c.fix.empty()) items += "       fix: " + c.fix + "\n";
  }
  out += flagged == 0 ? "\nChecks: all OK\n" : "\nChecks:\n" + items;
  return out;
}

std::string RenderCommtestJson(const CommtestReport& r) {
  nlohmann::json j;
  j["driver_version"] = r.driver_version;
  j["size_bytes"] = r.size_bytes;
  j["threshold"] = r.threshold;
  j["expectations_known"] = r.expectations_known;
  if (!r.expectations_note.empty()) j["expectations_note"] = r.expectations_note;
  j["gpus"] = nlohmann::json::array();
  for (const GpuResult& g : r.gpus) {
    j["gpus"].push_back({{"index", g.index},
                         {"name", g.name},
                         {"h2d", FigureJson(g.h2d)},
                         {"d2h", FigureJson(g.d2h)},
                         {"d2d", FigureJson(g.d2d)},
                         {"all_pairs", FigureJson(g.all_pairs)}});
  }
  j["pairs"] = nlohmann::json::array();
  for (const PairResult& p : r.pairs) {
    j["pairs"].push_back({{"gpus", {p.a, p.b}},
                          {"link", p.link},
                          {"p2p", {p.p2p_ab, p.p2p_ba}},
                          {"a_to_b", FigureJson(p.ab)},
                          {"b_to_a", FigureJson(p.ba)},
                          {"bidirectional", FigureJson(p.bidir)},
                          {"latency_us", p.latency_us}});
  }
  j["checks"] = CheckItemsJson(r.checks);
  j["status"] = CheckStatusName(static_cast<CheckStatus>(CommtestExitCode(r)));
  return j.dump(2) + "\n";
}

}  // namespace hachi::diag
