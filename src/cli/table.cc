#include "cli/table.h"

#include <algorithm>

namespace hachi::cli {

std::string FitField(std::string_view value, int width, Align align) {
  if (width <= 0) return std::string(value);
  const size_t w = static_cast<size_t>(width);
  if (value.size() >= w) return std::string(value.substr(0, w));
  std::string pad(w - value.size(), ' ');
  return align == Align::kRight ? pad + std::string(value) : std::string(value) + pad;
}

Result<std::vector<FormatItem>> ParseFormatString(std::string_view format,
                                                  std::string_view known_codes) {
  std::vector<FormatItem> items;
  auto add_literal = [&](std::string_view s) {
    if (!items.empty() && items.back().literal) {
      items.back().text += s;
    } else {
      FormatItem it;
      it.literal = true;
      it.text = std::string(s);
      items.push_back(std::move(it));
    }
  };
  size_t i = 0;
  while (i < format.size()) {
    if (format[i] != '%') {
      add_literal(format.substr(i, 1));
      ++i;
      continue;
    }
    size_t start = i++;
    if (i < format.size() && format[i] == '%') {
      add_literal("%");
      ++i;
      continue;
    }
    FormatItem it;
    if (i < format.size() && (format[i] == '.' || format[i] == '-')) {
      it.align = format[i] == '.' ? Align::kRight : Align::kLeft;
      ++i;
    }
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
      it.width = std::min(it.width * 10 + (format[i] - '0'), 1000);
      ++i;
    }
    if (i >= format.size()) {
      return InvalidArgument("format '" + std::string(format) + "': '" +
                             std::string(format.substr(start)) + "' has no field code");
    }
    it.code = format[i++];
    if (known_codes.find(it.code) == std::string_view::npos) {
      return InvalidArgument("format '" + std::string(format) + "': unknown field %" +
                             std::string(1, it.code) +
                             " (known: " + std::string(known_codes) + ")");
    }
    items.push_back(std::move(it));
  }
  return items;
}

std::string RenderFormatLine(const std::vector<FormatItem>& items,
                             const std::function<std::string(char)>& value) {
  std::string line;
  for (const FormatItem& it : items) {
    line += it.literal ? it.text : FitField(value(it.code), it.width, it.align);
  }
  return line;
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<int> widths;
  for (size_t c = 0; c < columns_.size(); ++c) {
    int w = columns_[c].width;
    if (w == 0) {
      w = static_cast<int>(columns_[c].title.size());
      for (const auto& row : rows_) w = std::max(w, static_cast<int>(row[c].size()));
    }
    widths.push_back(w);
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c > 0) out += gap_;
      out += FitField(cells[c], widths[c], columns_[c].align);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> titles;
  for (const Column& col : columns_) titles.push_back(col.title);
  std::string out = line(titles);
  for (const auto& row : rows_) out += line(row);
  return out;
}

}  // namespace hachi::cli
