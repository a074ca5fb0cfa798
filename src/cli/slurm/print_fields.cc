#include "cli/slurm/print_fields.h"

#include <cstdio>
#include <cstdlib>

#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

bool HasPrefixNoCase(std::string_view name, std::string_view prefix) {
  return prefix.size() <= name.size() && ToLower(name.substr(0, prefix.size())) == prefix;
}

std::string Pad(const std::string& v, int width) {
  const size_t w = static_cast<size_t>(std::abs(width));
  if (v.size() >= w) return v;
  const std::string pad(w - v.size(), ' ');
  return width < 0 ? v + pad : pad + v;
}

// print_fields_double outside parsable output: "%*f", or "%*.*e" when wider.
std::string DoubleText(double d, int width) {
  const int w = std::abs(width);
  char buf[128];
  std::snprintf(buf, sizeof buf, "%*f", w, d);
  if (static_cast<int>(std::string_view(buf).size()) <= w) {
    std::snprintf(buf, sizeof buf, width < 0 ? "%-*f" : "%*f", w, d);
    return buf;
  }
  int prec = w;
  std::snprintf(buf, sizeof buf, "%*.*e", w, prec, d);
  const int len = static_cast<int>(std::string_view(buf).size());
  if (len > w) prec -= len - w;
  if (prec < 0) prec = 0;
  std::snprintf(buf, sizeof buf, width < 0 ? "%-*.*e" : "%*.*e", w, prec, d);
  return buf;
}

std::string Cell(const FieldValue& v, int width, bool parsable) {
  switch (v.kind) {
    case FieldValue::kUnset:
      return parsable ? "" : std::string(static_cast<size_t>(std::abs(width)), ' ');
    case FieldValue::kNumber:
      return parsable ? v.text : Pad(v.text, width);
    case FieldValue::kDouble: {
      if (!parsable) return DoubleText(v.number, width);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%f", v.number);
      return buf;
    }
    case FieldValue::kString:
      break;
  }
  if (parsable) return v.text;
  const size_t w = static_cast<size_t>(std::abs(width));
  if (v.text.size() > w) return v.text.substr(0, w - 1) + "+";
  return Pad(v.text, width);
}

}  // namespace

Result<std::vector<FieldColumn>> ParseFieldList(std::string_view spec,
                                                std::span<const FieldDef> defs,
                                                FieldMatch match) {
  std::vector<FieldColumn> cols;
  std::string s(spec);
  for (char& c : s) {
    if (c == ' ') c = ',';
  }
  for (std::string_view item : Split(s, ',')) {
    if (item.empty()) continue;
    const size_t pct = item.find('%');
    const std::string name = ToLower(item.substr(0, pct));
    int found = -1;
    for (size_t i = 0; i < defs.size() && found < 0 && !name.empty(); ++i) {
      const bool hit = match == FieldMatch::kExact ? ToLower(defs[i].Key()) == name
                                                   : HasPrefixNoCase(defs[i].Key(), name);
      if (hit) found = static_cast<int>(i);
    }
    if (found < 0) {
      return InvalidArgument("Invalid field requested: \"" + Clip(item.substr(0, pct)) +
                             "\"");
    }
    int width = defs[found].width;
    if (pct != std::string_view::npos) {
      std::optional<long long> w = ParseInt(item.substr(pct + 1));
      if (!w || *w == 0 || *w > 1000 || *w < -1000) {
        return InvalidArgument("Invalid field width: \"" + Clip(item) + "\"");
      }
      width = defs[found].width < 0 ? -static_cast<int>(std::abs(*w))
                                    : static_cast<int>(std::abs(*w));
    }
    cols.push_back({found, width});
  }
  if (cols.empty()) return InvalidArgument("No fields requested");
  return cols;
}

FieldOutput FieldOutputOf(const ParsedArgs& p) {
  FieldOutput out;
  out.header = !p.Has("noheader");
  out.parsable = p.Has("parsable2")  ? Parsable::kNoEnding
                 : p.Has("parsable") ? Parsable::kEnding
                                     : Parsable::kNo;
  return out;
}

std::string PrintFields(const std::vector<FieldColumn>& cols,
                        std::span<const FieldDef> defs,
                        const std::vector<std::vector<FieldValue>>& rows,
                        FieldOutput out) {
  const bool parsable = out.parsable != Parsable::kNo;
  std::string text;
  auto line = [&](auto cell) {
    for (size_t i = 0; i < cols.size(); ++i) {
      text += cell(i);
      if (out.parsable == Parsable::kNoEnding) {
        if (i + 1 < cols.size()) text += '|';
      } else {
        text += parsable ? '|' : ' ';
      }
    }
    text += '\n';
  };
  if (out.header) {
    line([&](size_t i) {
      const std::string_view name = defs[cols[i].def].name;
      if (parsable) return std::string(name);
      // Titles are cut to the width, without the '+' values get.
      return Pad(
          std::string(name.substr(0, static_cast<size_t>(std::abs(cols[i].width)))),
          cols[i].width);
    });
    if (!parsable) {
      line([&](size_t i) {
        return std::string(static_cast<size_t>(std::abs(cols[i].width)), '-');
      });
    }
  }
  for (const std::vector<FieldValue>& row : rows) {
    line([&](size_t i) {
      return i < row.size() ? Cell(row[i], cols[i].width, parsable)
                            : Cell(FieldValue::Unset(), cols[i].width, parsable);
    });
  }
  return text;
}

}  // namespace hachi::cli::slurm
