// Reader for `nvidia-smi topo -m`. See nvidia_smi.h for the contract.
//
// The format, as nvidia-smi prints it: a header line of column names separated by tabs
// (first cell empty: the row-label column), then one row per device (GPUs, then NICs),
// each "LABEL\tcell\tcell...", the device cells first (one per device column, "X" on the
// diagonal), then attribute cells (CPU Affinity, NUMA Affinity, GPU NUMA ID, ...). When a
// header name is wider than a tab stop, nvidia-smi pads the row with an extra tab, so a
// row can hold empty cells that belong to no column. A blank line and "Legend:" end the
// matrix; a "NIC Legend:" block may map NICn to device names.
//
// nvidia-smi underlines the header with terminal escapes ("\e[4mGPU0 ... \e[0m") even
// when writing to a pipe (seen on driver 580 with an H200); they are removed first.
//
// Pasted copies lose tabs (expanded to spaces at 8-column stops), lose the header's
// leading tab, or collapse runs of spaces; so fields are split on tabs when the line has
// any, else on runs of two or more spaces, else on single spaces, and attribute cells are
// mapped by order when their count matches the header, else by column position.
#include <algorithm>
#include <map>
#include <optional>

#include "core/cpulist.h"
#include "core/strings.h"
#include "topo/nvidia_smi.h"

namespace hachi::topo {
namespace {

constexpr int kTabWidth = 8;

struct Field {
  std::string_view text;  // trimmed
  int column = 0;         // display column of the field's start (tabs expanded)
};

// Splits a tab-separated line, keeping empty fields, with the display column (tabs
// expanded to 8-column stops) of each field's first non-blank character.
std::vector<Field> SplitTabs(std::string_view line) {
  std::vector<Field> out;
  int col = 0;
  size_t start = 0;
  int text_col = -1;
  int start_col = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == '\t') {
      out.push_back(
          {Trim(line.substr(start, i - start)), text_col >= 0 ? text_col : start_col});
      if (i < line.size()) col = (col / kTabWidth + 1) * kTabWidth;
      start = i + 1;
      start_col = col;
      text_col = -1;
    } else {
      if (text_col < 0 && line[i] != ' ') text_col = col;
      ++col;
    }
  }
  return out;
}

// Splits a line without tabs into words with their columns.
std::vector<Field> SplitWords(std::string_view line) {
  std::vector<Field> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size()) break;
    size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    out.push_back({line.substr(start, i - start), static_cast<int>(start)});
  }
  return out;
}

// A space-aligned line (tabs expanded to 8-column stops): a field starts at a tab stop
// (or one past it, as in " X "), so a word one space after the previous one and off a
// tab stop continues that field ("CPU Affinity"), while "mlx5_10 mlx5_11" are two.
std::vector<Field> JoinAlignedWords(const std::vector<Field>& words,
                                    std::string_view line) {
  std::vector<Field> out;
  for (const Field& w : words) {
    if (!out.empty()) {
      Field& prev = out.back();
      int prev_end = prev.column + static_cast<int>(prev.text.size());
      if (w.column == prev_end + 1 && w.column % kTabWidth != 0) {
        prev.text =
            line.substr(static_cast<size_t>(prev.column),
                        static_cast<size_t>(w.column - prev.column) + w.text.size());
        continue;
      }
    }
    out.push_back(w);
  }
  return out;
}

bool HasTab(std::string_view line) { return line.find('\t') != std::string_view::npos; }

// Fields of one line; empty fields are kept only for tab-separated lines. A line with
// no tab and no run of two spaces had its spacing collapsed: every word is a field
// (attribute names are rejoined by RejoinAttributeNames).
std::vector<Field> SplitFields(std::string_view line) {
  if (HasTab(line)) return SplitTabs(line);
  std::vector<Field> words = SplitWords(line);
  if (line.find("  ") == std::string_view::npos) return words;
  return JoinAlignedWords(words, line);
}

std::vector<Field> NonEmpty(const std::vector<Field>& fields) {
  std::vector<Field> out;
  for (const Field& f : fields) {
    if (!f.text.empty()) out.push_back(f);
  }
  return out;
}

// Header names that pasting may have split on single spaces.
std::vector<Field> RejoinAttributeNames(std::vector<Field> fields) {
  static const std::vector<std::vector<std::string_view>> kPhrases = {
      {"GPU", "NUMA", "ID"}, {"CPU", "Affinity"}, {"NUMA", "Affinity"}};
  std::vector<Field> out;
  for (size_t i = 0; i < fields.size();) {
    bool joined = false;
    for (const auto& phrase : kPhrases) {
      if (i + phrase.size() > fields.size()) continue;
      bool match = true;
      for (size_t k = 0; k < phrase.size(); ++k) {
        if (fields[i + k].text != phrase[k]) match = false;
      }
      if (!match) continue;
      const char* b = fields[i].text.data();
      const char* e = fields[i + phrase.size() - 1].text.data() +
                      fields[i + phrase.size() - 1].text.size();
      out.push_back({std::string_view(b, static_cast<size_t>(e - b)), fields[i].column});
      i += phrase.size();
      joined = true;
      break;
    }
    if (!joined) out.push_back(fields[i++]);
  }
  return out;
}

std::optional<int> GpuIndexOf(std::string_view name) {
  if (!StartsWith(name, "GPU") || name.size() < 4) return std::nullopt;
  std::optional<long long> v = ParseInt(name.substr(3));
  if (!v || *v < 0 || *v >= GpuSet::kMaxGpus) return std::nullopt;
  return static_cast<int>(*v);
}

bool IsMatrixEnd(std::string_view line) {
  std::string_view t = Trim(line);
  return t.empty() || StartsWith(t, "Legend") || StartsWith(t, "NIC Legend") ||
         StartsWith(t, "```");
}

// `topo -m` shows NV<n> for NVLinked pairs and so hides their PCIe relation. Two GPUs
// that are both PIX (at most one bridge) to the same NIC sit under that NIC's switch,
// so they are PIX to each other too; recording it lets the PCIe-switch groups (and the
// allocator's switch tie-break) work on NVLink boxes read from text.
void InferSwitchPeersFromNics(Topology& t) {
  for (const Nic& nic : t.nics()) {
    for (size_t a = 0; a < nic.gpu_paths.size(); ++a) {
      for (size_t b = 0; b < nic.gpu_paths.size(); ++b) {
        if (a == b || nic.gpu_paths[a] != PciePath::kPix ||
            nic.gpu_paths[b] != PciePath::kPix) {
          continue;
        }
        int ga = static_cast<int>(a), gb = static_cast<int>(b);
        Link l = t.link(ga, gb);
        if (l.nvlinks > 0 && l.pcie == PciePath::kUnknown) {
          l.pcie = PciePath::kPix;
          t.SetLink(ga, gb, l);
        }
      }
    }
  }
}

class MatrixReader {
 public:
  MatrixReader(std::string_view text, std::string_view origin)
      : text_(StripAnsiEscapes(text)), lines_(SplitLines(text_)), origin_(origin) {}

  Result<Topology> Read();

 private:
  void Finding(Severity sev, std::string code, GpuSet gpus, std::string msg) {
    findings_.push_back(
        {sev, std::move(code), gpus, std::string(origin_) + ": " + std::move(msg)});
  }
  struct Row {
    size_t line_no;
    std::string_view label;
    std::vector<Field> cells;  // after the label
  };
  int FindHeader() const;
  std::vector<Row> ReadRows(int header_line, size_t* end_line);
  // Device columns and attribute columns (device_cols_, attr_cols_).
  Status SplitColumns(const std::vector<Field>& hdr, const std::vector<Row>& rows);
  void ReadRow(const Row& row, const std::vector<int>& col_gpu,
               const std::vector<int>& col_nic, std::vector<bool>* seen_row, Topology* t);
  void ReportBadCells();
  void ReadAttributes(int gpu, std::string_view label, const std::vector<Field>& rest,
                      Topology& t);
  void ReadNicLegend(size_t from, Topology& t);

  std::string
      text_;  // the input without terminal escapes (nvidia-smi underlines its header)
  std::vector<std::string_view> lines_;
  std::string_view origin_;
  std::vector<hachi::topo::Finding> findings_;
  // Header layout.
  std::vector<std::string> device_cols_;  // GPU and NIC column names, in order
  std::vector<Field> attr_cols_;          // attribute columns with display positions
  struct BadCell {
    size_t first_line = 0;
    std::string rows;  // "GPU0,GPU1"
    GpuSet gpus;
    bool attributes_lost = false;
  };
  std::map<std::pair<std::string, std::string>, BadCell> bad_cells_;
};

int MatrixReader::FindHeader() const {
  for (size_t i = 0; i < lines_.size(); ++i) {
    std::vector<Field> f = NonEmpty(SplitFields(lines_[i]));
    for (size_t k = 0; k < f.size(); ++k) {
      if (f[k].text != "GPU0") continue;
      // GPU0's own row has its diagonal "X" right after the label; the header has not.
      if (k == 0 && f.size() > 1 && f[1].text == "X") break;
      return static_cast<int>(i);
    }
  }
  return -1;
}

Result<Topology> MatrixReader::Read() {
  int header_line = FindHeader();
  if (header_line < 0) {
    return InvalidArgument(std::string(origin_) +
                           ": no `nvidia-smi topo -m` matrix found (no header line with "
                           "a GPU0 column)");
  }
  std::string_view header = lines_[header_line];
  std::vector<Field> hdr = RejoinAttributeNames(NonEmpty(SplitFields(header)));
  // A header that starts at column 0 lost the (empty) row-label cell in front of it.
  if (!hdr.empty() && hdr.front().column == 0) {
    for (Field& f : hdr) f.column += kTabWidth;
  }
  size_t end = 0;
  const std::vector<Row> rows = ReadRows(header_line, &end);
  HACHI_RETURN_IF_ERROR(SplitColumns(hdr, rows));
  // GPUs: the GPU<n> columns, which must be GPU0..GPU<n-1>.
  std::vector<int> col_gpu(device_cols_.size(), -1);
  int gpu_count = 0;
  for (size_t c = 0; c < device_cols_.size(); ++c) {
    if (std::optional<int> g = GpuIndexOf(device_cols_[c])) {
      col_gpu[c] = *g;
      gpu_count = std::max(gpu_count, *g + 1);
    }
  }
  int gpu_cols = static_cast<int>(
      std::count_if(col_gpu.begin(), col_gpu.end(), [](int g) { return g >= 0; }));
  if (gpu_cols != gpu_count) {
    Finding(Severity::kError, "gpu-missing", {},
            "header has " + std::to_string(gpu_cols) + " GPU columns but names GPU" +
                std::to_string(gpu_count - 1) + "; the missing indices have no data");
  }
  Topology t(gpu_count);
  std::vector<bool> seen_row(static_cast<size_t>(gpu_count), false);

  // NICs: every non-GPU device column.
  std::vector<int> col_nic(device_cols_.size(), -1);
  for (size_t c = 0; c < device_cols_.size(); ++c) {
    if (col_gpu[c] >= 0) continue;
    col_nic[c] = static_cast<int>(t.nics().size());
    Nic nic;
    nic.name = device_cols_[c];
    nic.device = nic.name;
    nic.gpu_paths.assign(static_cast<size_t>(gpu_count), PciePath::kUnknown);
    t.mutable_nics().push_back(std::move(nic));
  }

  for (const Row& row : rows) ReadRow(row, col_gpu, col_nic, &seen_row, &t);
  ReportBadCells();
  for (int g = 0; g < gpu_count; ++g) {
    if (!seen_row[static_cast<size_t>(g)]) {
      Finding(Severity::kError, "gpu-missing", GpuSet::FromIndices({g}),
              "no row for GPU" + std::to_string(g) + "; its links are unknown");
    }
  }
  ReadNicLegend(end, t);
  InferSwitchPeersFromNics(t);
  for (auto& f : findings_) t.AddReadFinding(std::move(f));
  t.set_source("nvidia-smi topo -m (" + std::string(origin_) + ")");
  return t;
}

// The data rows: from after the header until the blank line or legend (*end_line).
std::vector<MatrixReader::Row> MatrixReader::ReadRows(int header_line, size_t* end_line) {
  std::vector<Row> rows;
  size_t& end = *end_line;
  end = static_cast<size_t>(header_line) + 1;
  for (; end < lines_.size() && !IsMatrixEnd(lines_[end]); ++end) {
    std::vector<Field> f = SplitFields(lines_[end]);
    if (!HasTab(lines_[end])) f = RejoinAttributeNames(std::move(f));
    size_t first = 0;
    while (first < f.size() && f[first].text.empty()) ++first;
    if (first == f.size()) continue;
    Row r{end + 1, f[first].text, {}};
    r.cells.assign(f.begin() + static_cast<long>(first) + 1, f.end());
    rows.push_back(std::move(r));
  }

  return rows;
}

Status MatrixReader::SplitColumns(const std::vector<Field>& hdr,
                                  const std::vector<Row>& rows) {
  // Device columns are the header names that also label a row; every name up to the
  // last of them is a device column (a device whose row is missing is still a column).
  std::map<std::string_view, size_t> row_of;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!row_of.emplace(rows[i].label, i).second) {
      Finding(Severity::kError, "malformed-row", {},
              "line " + std::to_string(rows[i].line_no) + ": row " +
                  std::string(rows[i].label) + " appears twice; the second is ignored");
    }
  }
  size_t last_device = 0;
  bool any_device = false;
  for (size_t c = 0; c < hdr.size(); ++c) {
    if (row_of.count(hdr[c].text) || GpuIndexOf(hdr[c].text)) {
      last_device = c;
      any_device = true;
    }
  }
  if (!any_device) {
    return InvalidArgument(std::string(origin_) + ": header has no device columns");
  }
  for (size_t c = 0; c < hdr.size(); ++c) {
    if (c <= last_device) {
      device_cols_.emplace_back(hdr[c].text);
    } else {
      attr_cols_.push_back(hdr[c]);
    }
  }

  return Status::Ok();
}

// One row's cells: links to GPUs (and from GPUs to NICs), then a GPU row's attributes.
void MatrixReader::ReadRow(const Row& row, const std::vector<int>& col_gpu,
                           const std::vector<int>& col_nic, std::vector<bool>* seen_row,
                           Topology* t) {
  std::optional<int> gpu = GpuIndexOf(row.label);
  std::string where =
      "line " + std::to_string(row.line_no) + ", row " + std::string(row.label);
  auto col_it = std::find(device_cols_.begin(), device_cols_.end(), row.label);
  if (col_it == device_cols_.end()) {
    Finding(Severity::kWarning, "malformed-row", {},
            where + ": no column of that name in the header; row ignored");
    return;
  }
  size_t self_col = static_cast<size_t>(col_it - device_cols_.begin());
  // Device cells are never empty in nvidia-smi output: take fields in order.
  std::vector<Field> cells = row.cells;
  bool malformed = false;
  GpuSet row_gpus;
  if (gpu) row_gpus.Insert(*gpu);
  if (gpu) (*seen_row)[static_cast<size_t>(*gpu)] = true;
  size_t c = 0;
  for (; c < device_cols_.size(); ++c) {
    std::string cell_where = where + ", column " + device_cols_[c];
    if (c >= cells.size()) {
      Finding(Severity::kError, "malformed-row", row_gpus,
              cell_where + ": row ends early (" + std::to_string(cells.size()) +
                  " cells for " + std::to_string(device_cols_.size()) +
                  " device columns); the missing links are unknown");
      malformed = true;
      break;
    }
    bool is_self = false;
    Result<Link> link = ParseLinkCell(cells[c].text, &is_self);
    if (!link.ok()) {
      // Grouped by (column, text): a fault that repeats on every row is one finding.
      BadCell& bad = bad_cells_[{device_cols_[c], std::string(cells[c].text)}];
      if (bad.rows.empty()) bad.first_line = row.line_no;
      bad.rows += (bad.rows.empty() ? "" : ",") + std::string(row.label);
      bad.gpus = bad.gpus | row_gpus;
      bad.attributes_lost = bad.attributes_lost || (gpu && !attr_cols_.empty());
      malformed = true;
      continue;
    }
    if (is_self != (c == self_col)) {
      Finding(Severity::kError, "malformed-cell", row_gpus,
              cell_where + (is_self ? ": 'X' (self) off the diagonal"
                                    : ": expected 'X' on the diagonal, found '" +
                                          std::string(cells[c].text) + "'"));
      malformed = true;
      continue;
    }
    if (is_self) continue;
    if (gpu && col_gpu[c] >= 0) {
      t->SetLink(*gpu, col_gpu[c], *link);
    } else if (gpu && col_nic[c] >= 0) {
      if (link->nvlinks > 0) {
        Finding(Severity::kWarning, "malformed-cell", row_gpus,
                cell_where + ": NVLink to a NIC is not expected");
      }
      t->mutable_nics()[static_cast<size_t>(col_nic[c])]
          .gpu_paths[static_cast<size_t>(*gpu)] = link->pcie;
    }
  }
  if (!gpu) return;       // NIC rows carry no attributes worth reading
  if (malformed) return;  // the rest of the row is shifted: not trusted
  std::vector<Field> rest(cells.begin() + static_cast<long>(device_cols_.size()),
                          cells.end());
  ReadAttributes(*gpu, row.label, rest, *t);
}

// The unreadable cells, one finding per (column, text).
void MatrixReader::ReportBadCells() {
  for (const auto& [key, bad] : bad_cells_) {
    std::string shown = key.second.empty() ? "an empty cell" : "'" + key.second + "'";
    Finding(Severity::kError, "malformed-cell", bad.gpus,
            "line " + std::to_string(bad.first_line) + ", row" +
                (bad.rows.find(',') != std::string::npos ? "s " : " ") + bad.rows +
                ", column " + key.first + ": " + shown +
                " is not a link type (expected X, NV<n>, PIX, PXB, PHB, NODE, SYS or "
                "SOC); that link is unknown" +
                (bad.attributes_lost
                     ? " and the rest of the row (CPU/NUMA affinity) is not read, since "
                       "its cells may be shifted"
                     : ""));
  }
}

void MatrixReader::ReadAttributes(int gpu, std::string_view label,
                                  const std::vector<Field>& rest, Topology& t) {
  std::vector<Field> values = NonEmpty(rest);
  if (values.empty() && attr_cols_.empty()) return;
  std::vector<int> col_of(values.size(), -1);
  if (values.size() == attr_cols_.size()) {
    for (size_t i = 0; i < values.size(); ++i) col_of[i] = static_cast<int>(i);
  } else {
    // Some value is missing (or extra): place each by its display column.
    int prev = -1;
    for (size_t i = 0; i < values.size(); ++i) {
      int best = -1;
      for (size_t a = 0; a < attr_cols_.size(); ++a) {
        if (attr_cols_[a].column <= values[i].column + 1) best = static_cast<int>(a);
      }
      if (best <= prev) best = -1;  // two values in one column: don't guess
      col_of[i] = best;
      if (best >= 0) prev = best;
    }
  }
  GpuSet me = GpuSet::FromIndices({gpu});
  Gpu& g = t.mutable_gpu(gpu);
  for (size_t i = 0; i < values.size(); ++i) {
    std::string where = "row " + std::string(label);
    if (col_of[i] < 0) {
      Finding(Severity::kWarning, "malformed-row", me,
              where + ": value '" + std::string(values[i].text) +
                  "' matches no attribute column; ignored");
      continue;
    }
    std::string_view name = attr_cols_[static_cast<size_t>(col_of[i])].text;
    std::string_view v = values[i].text;
    where += ", column " + std::string(name);
    if (v == "N/A") continue;
    if (name == "CPU Affinity") {
      Result<std::vector<int>> cpus = ParseCpuList(v);
      if (!cpus.ok()) {
        Finding(Severity::kError, "malformed-cell", me,
                where + ": '" + std::string(v) + "' is not a CPU list");
      } else {
        g.cpu_affinity = FormatCpuList(*cpus);
      }
    } else if (name == "NUMA Affinity") {
      if (std::optional<long long> n = ParseInt(v); n && *n >= 0) {
        g.numa_node = static_cast<int>(*n);
      } else if (ParseCpuList(v).ok()) {
        // A VM may show a range: the GPU is near several nodes, none in particular.
        Finding(Severity::kInfo, "numa-multiple", me,
                where + ": GPU" + std::to_string(gpu) + " is near NUMA nodes " +
                    std::string(v) + " (typical of a VM); NUMA placement is unknown");
      } else {
        Finding(Severity::kError, "malformed-cell", me,
                where + ": '" + std::string(v) + "' is not a NUMA node");
      }
    } else if (name == "GPU NUMA ID") {
      if (!ParseInt(v)) {
        Finding(Severity::kWarning, "malformed-cell", me,
                where + ": '" + std::string(v) + "' is not a NUMA id");
      }
    }
    // Other attribute columns (future nvidia-smi versions) are accepted and ignored.
  }
  if (values.size() > attr_cols_.size()) {
    Finding(Severity::kWarning, "malformed-row", me,
            "row " + std::string(label) + ": " + std::to_string(values.size()) +
                " attribute values for " + std::to_string(attr_cols_.size()) +
                " attribute columns");
  }
}

void MatrixReader::ReadNicLegend(size_t from, Topology& t) {
  bool in_legend = false;
  for (size_t i = from; i < lines_.size(); ++i) {
    std::string_view s = Trim(lines_[i]);
    if (StartsWith(s, "NIC Legend")) {
      in_legend = true;
      continue;
    }
    if (!in_legend || s.empty()) continue;
    size_t colon = s.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = Trim(s.substr(0, colon));
    std::string_view dev = Trim(s.substr(colon + 1));
    for (Nic& nic : t.mutable_nics()) {
      if (nic.name == name) nic.device = std::string(dev);
    }
  }
}

}  // namespace

Result<Topology> ParseTopoMatrix(std::string_view text, std::string_view origin) {
  return MatrixReader(text, origin).Read();
}

}  // namespace hachi::topo
