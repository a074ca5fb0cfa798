#include "cli/slurm/sinfo_format.h"

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "cli/slurm/slurm_text.h"
#include "cli/slurm_format.h"
#include "cli/table.h"
#include "core/hostlist.h"
#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

using state::NodeStatus;

// Built at the first parse, not at the start of every command (the binary's static
// initialisers are part of what each process pays: docs/benchmarks.md, "Process start").
const std::vector<OptDef>& SinfoOpts() {
  static const auto* opts = new std::vector<OptDef>{
      {'h', "noheader", false}, {'N', "Node", false},  {'s', "summarize", false},
      {'o', "format", true},    {'O', "Format", true}, {'p', "partition", true},
      {'n', "nodes", true},     {'a', "all", false},   {'l', "long", false},
      {'v', "verbose", false},  {0, "help", false},    {0, "usage", false},
      {0, "server", true},      {'e', "exact", false}, {0, "noconvert", false}};
  return *opts;
}

// A group of alike nodes of one partition (one line).
struct Group {
  const PartitionInfo* part = nullptr;
  std::vector<const NodeStatus*> nodes;
};

// sinfo's default sort puts states in this order (Slurm sorts by its state number,
// descending).
int StateRank(const std::string& short_state) {
  static const char* kOrder[] = {"mix", "alloc", "drng", "idle", "drain", "down"};
  for (int i = 0; i < 6; ++i) {
    if (short_state == kOrder[i]) return i;
  }
  return 6;
}

std::string Cpus(const std::vector<const NodeStatus*>& nodes) {
  long a = 0, i = 0, o = 0, t = 0;
  for (const NodeStatus* n : nodes) {
    // NodeFieldValue('C') is "A/I/O/T" for one node.
    std::vector<std::string_view> p = Split(NodeFieldValue(*n, 'C'), '/');
    if (p.size() != 4) continue;
    a += ParseInt(p[0]).value_or(0);
    i += ParseInt(p[1]).value_or(0);
    o += ParseInt(p[2]).value_or(0);
    t += ParseInt(p[3]).value_or(0);
  }
  return std::to_string(a) + "/" + std::to_string(i) + "/" + std::to_string(o) + "/" +
         std::to_string(t);
}

// Nodes as A/I/O/T (allocated or mixed / idle / other / total), sinfo -s's %F.
std::string NodeCounts(const std::vector<const NodeStatus*>& nodes) {
  long a = 0, i = 0, o = 0;
  for (const NodeStatus* n : nodes) {
    const std::string s = NodeStateText(*n, false);
    if (s == "alloc" || s == "mix") {
      ++a;
    } else if (s == "idle") {
      ++i;
    } else {
      ++o;
    }
  }
  return std::to_string(a) + "/" + std::to_string(i) + "/" + std::to_string(o) + "/" +
         std::to_string(nodes.size());
}

std::string Value(const Group& g, char code) {
  const PartitionInfo& p = *g.part;
  const NodeStatus* first = g.nodes.empty() ? nullptr : g.nodes.front();
  auto names = [&] {
    std::vector<std::string> v;
    for (const NodeStatus* n : g.nodes) v.push_back(n->record.name);
    return v;
  };
  switch (code) {
    case 'P':
      return p.name + (p.is_default ? "*" : "");
    case 'R':
      return p.name;
    case 'a':
      return "up";
    case 'l':
      return SinfoTimeLimit(p.max_time);
    case 'L':
      return p.default_time > 0 ? SinfoTimeLimit(p.default_time) : "n/a";
    case 'D':
      return std::to_string(g.nodes.size());
    case 'F':
      return NodeCounts(g.nodes);
    case 'N':
    case 'n':
      return CompressHostList(names());
    case 'C':
      return Cpus(g.nodes);
    case 'f':
      return first != nullptr ? NodeFieldValue(*first, 'f') : "(null)";
    case 't':
    case 'T':
      if (first == nullptr) return "n/a";
      return NodeStateText(*first, code == 'T');
    case 'G':
    case 'c':
    case 'm':
    case 'E':
    case 'e':
    case 'o':
      if (first == nullptr) return code == 'E' ? "none" : "(null)";
      return NodeFieldValue(*first, code);
  }
  return "";
}

// A column's title: the partition-level fields' here, a node field's as `hachi nodes`
// names it.
std::string Title(char code) {
  static constexpr std::pair<char, const char*> kPartitionTitles[] = {
      {'P', "PARTITION"},      {'R', "PARTITION"},     {'a', "AVAIL"},
      {'l', "TIMELIMIT"},      {'L', "DEFAULTTIME"},   {'D', "NODES"},
      {'F', "NODES(A/I/O/T)"}, {'f', "AVAIL_FEATURES"}};
  for (const auto& [c, title] : kPartitionTitles) {
    if (c == code) return title;
  }
  return NodeFieldTitle(code);
}

// -O names -> codes.
struct LongField {
  std::string_view name;
  char code;
};
constexpr LongField kLongFields[] = {
    {"partition", 'P'}, {"partitionname", 'R'}, {"available", 'a'},    {"time", 'l'},
    {"timelimit", 'l'}, {"defaulttime", 'L'},   {"nodes", 'D'},        {"nodeaiot", 'F'},
    {"nodelist", 'N'},  {"nodehost", 'n'},      {"cpusstate", 'C'},    {"cpus", 'c'},
    {"memory", 'm'},    {"features", 'f'},      {"statecompact", 't'}, {"statelong", 'T'},
    {"gres", 'G'},      {"reason", 'E'},        {"freemem", 'e'},      {"nodeaddr", 'o'},
};

}  // namespace

std::string SinfoTimeLimit(Duration d) { return d <= 0 ? "infinite" : FormatElapsed(d); }

Result<std::vector<PartitionInfo>> PartitionsFromJson(std::string_view body) {
  using nlohmann::json;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("partitions") || !j["partitions"].is_array()) {
    return Internal("partitions: the reply has no partitions list");
  }
  std::vector<PartitionInfo> out;
  for (const json& p : j["partitions"]) {
    PartitionInfo info;
    info.name = p.value("name", "");
    if (p.contains("nodes") && p["nodes"].is_array()) {
      for (const json& n : p["nodes"]) {
        if (n.is_string()) info.nodes.push_back(n.get<std::string>());
      }
    }
    info.default_time = p.value("default_time", int64_t{0});
    info.max_time = p.value("max_time", int64_t{0});
    info.min_gpus = p.value("min_gpus", 0);
    info.max_gpus = p.value("max_gpus", 0);
    info.whole_node = p.value("mode", "") == "whole-node";
    info.is_default = out.empty();
    out.push_back(std::move(info));
  }
  return out;
}

Result<SinfoOptions> ParseSinfoArgs(const std::vector<std::string>& args) {
  Result<ParsedArgs> p = ParseArgs(args, SinfoOpts());
  if (!p.ok()) return p.status();
  if (!p->positional.empty()) {
    return InvalidArgument("Unrecognized argument: " + Clip(p->positional[0]));
  }
  SinfoOptions o;
  o.help = p->Has("help");
  o.usage = p->Has("usage");
  o.noheader = p->Has("noheader");
  o.node_lines = p->Has("Node");
  o.summarize = p->Has("summarize");
  o.format = p->Get("format");
  o.long_format = p->Get("Format");
  o.partitions = p->List("partition");
  for (const std::string& n : p->List("nodes")) {
    Result<std::vector<std::string>> names = ExpandHostList(n);
    if (!names.ok()) return InvalidArgument("Invalid hostlist: " + Clip(n));
    o.nodes.insert(o.nodes.end(), names->begin(), names->end());
  }
  o.server = p->Get("server");
  return o;
}

namespace {

// A -O column: its field's code and width (cut to width-1 and a space).
struct Column {
  char code;
  int width;
};

// -O NAME[:[.]WIDTH],...: width 20 by default.
Result<std::vector<Column>> LongColumns(const std::string& long_format) {
  std::vector<Column> long_cols;
  for (std::string_view item : Split(long_format, ',')) {
    item = Trim(item);
    if (item.empty()) continue;
    Result<LongFormatItem> parsed = ParseFormatItem(item);
    if (!parsed.ok()) return parsed.status();
    const std::string& name = parsed->name;
    const int width = parsed->width;
    const auto f = std::find_if(std::begin(kLongFields), std::end(kLongFields),
                                [&](const LongField& l) { return l.name == name; });
    if (f == std::end(kLongFields)) {
      return InvalidArgument("Invalid node format specification: " + Clip(name));
    }
    long_cols.push_back({f->code, width});
  }
  return long_cols;
}

// -o's codes, or the default format for the mode (its partition column as wide as the
// longest name).
Result<std::vector<FormatItem>> ShortFormat(
    const SinfoOptions& o, const std::vector<PartitionInfo>& partitions) {
  std::string format = o.format;
  if (format.empty()) {
    format = o.summarize    ? kSinfoSummaryFormat
             : o.node_lines ? kSinfoNodeFormat
                            : kSinfoDefaultFormat;
    // Slurm's default is "%#P ...": as wide as the longest name and its '*'.
    size_t width = 9;
    for (const PartitionInfo& p : partitions) {
      width = std::max(width, p.name.size() + (p.is_default ? 1 : 0));
    }
    if (const size_t at = format.find("%9P"); at != std::string::npos) {
      format.replace(at, 3, "%" + std::to_string(width) + "P");
    }
  }
  return ParseFormatString(format, "PRalLDFNnCcftTGEeom");
}

// The partition's own fields: a format without any of them shows nodes, not partitions.
bool PartitionField(char c) {
  return c == 'P' || c == 'R' || c == 'a' || c == 'l' || c == 'L';
}

// The lines: per partition, its nodes alike in every printed field but the aggregated
// ones share one (sinfo -N: a line per node, by name). A format that prints no field
// of the partition's (sinfo -o "%n %G %C") groups the nodes of all of them, each node
// once, as Slurm's sinfo does: its totals count no node twice.
std::vector<Group> GroupNodes(const SinfoOptions& o,
                              const std::vector<PartitionInfo>& partitions,
                              const std::vector<NodeStatus>& nodes,
                              const std::vector<char>& codes) {
  std::map<std::string, const NodeStatus*> by_name;
  for (const NodeStatus& n : nodes) by_name[n.record.name] = &n;
  auto wanted = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  const bool per_partition =
      o.node_lines || std::any_of(codes.begin(), codes.end(), PartitionField);
  std::set<std::string> seen;  // without per_partition: the nodes on a line already
  std::vector<Group> groups;
  std::vector<Group> mine;
  std::vector<std::string> keys;
  auto finish = [&](const PartitionInfo* empty_part) {
    if (mine.empty() && empty_part != nullptr && o.nodes.empty() && !o.node_lines) {
      mine.push_back(Group{empty_part, {}});
    }
    if (!o.node_lines) {
      std::stable_sort(mine.begin(), mine.end(), [](const Group& a, const Group& b) {
        auto rank = [](const Group& g) {
          return g.nodes.empty() ? 7 : StateRank(NodeStateText(*g.nodes[0], false));
        };
        return rank(a) < rank(b);
      });
    }
    groups.insert(groups.end(), mine.begin(), mine.end());
    mine.clear();
    keys.clear();
  };
  const PartitionInfo* first_shown = nullptr;
  for (const PartitionInfo& p : partitions) {
    if (!wanted(o.partitions, p.name)) continue;
    if (first_shown == nullptr) first_shown = &p;
    for (const std::string& name : p.nodes) {
      auto it = by_name.find(name);
      if (it == by_name.end() || !wanted(o.nodes, name)) continue;
      if (!per_partition && !seen.insert(name).second) continue;
      Group single{&p, {it->second}};
      if (o.node_lines) {
        mine.push_back(single);
        continue;
      }
      // Alike nodes share a line: every printed field but the aggregated ones equal.
      std::string key;
      for (char c : codes) {
        if (c == 'N' || c == 'n' || c == 'D' || c == 'C' || c == 'F') continue;
        key += Value(single, c) + '\x1f';
      }
      auto k = std::find(keys.begin(), keys.end(), key);
      if (k == keys.end()) {
        keys.push_back(key);
        mine.push_back(single);
      } else {
        mine[static_cast<size_t>(k - keys.begin())].nodes.push_back(it->second);
      }
    }
    if (per_partition) finish(&p);
  }
  if (!per_partition) finish(first_shown);
  if (o.node_lines) {  // sinfo -N: by node name, then the partitions' order
    std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
      return a.nodes[0]->record.name < b.nodes[0]->record.name;
    });
  }
  return groups;
}

}  // namespace

Result<std::string> RenderSinfo(const SinfoOptions& o,
                                const std::vector<PartitionInfo>& partitions,
                                const std::vector<NodeStatus>& nodes) {
  // The columns: -O names, or -o codes.
  std::vector<FormatItem> items;
  std::vector<Column> long_cols;
  if (!o.long_format.empty()) {
    Result<std::vector<Column>> cols = LongColumns(o.long_format);
    if (!cols.ok()) return cols.status();
    long_cols = std::move(*cols);
  } else {
    Result<std::vector<FormatItem>> parsed = ShortFormat(o, partitions);
    if (!parsed.ok()) return parsed.status();
    items = std::move(*parsed);
  }
  std::vector<char> codes;
  for (const FormatItem& i : items) {
    if (!i.literal) codes.push_back(i.code);
  }
  for (const Column& c : long_cols) codes.push_back(c.code);
  const std::vector<Group> groups = GroupNodes(o, partitions, nodes, codes);
  std::string out;
  auto long_line = [&](const std::function<std::string(char)>& v) {
    std::string s;
    for (const Column& c : long_cols)
      s += FitField(v(c.code), c.width - 1, Align::kLeft) + " ";
    return s + "\n";
  };
  if (!o.noheader) {
    out += long_cols.empty() ? RenderFormatLine(items, Title) + "\n" : long_line(Title);
  }
  for (const Group& g : groups) {
    auto v = [&](char c) { return Value(g, c); };
    out += long_cols.empty() ? RenderFormatLine(items, v) + "\n" : long_line(v);
  }
  return out;
}

}  // namespace hachi::cli::slurm
