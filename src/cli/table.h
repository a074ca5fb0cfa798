// Text tables for the CLI: Slurm-style format strings ("%.18i %-10j %R") with fixed
// widths and truncation as squeue/sinfo print them, and a small fit-to-content table
// for Hachi's own reports (docs/cli.md "Format codes").
//
// Pure functions and a plain value class; thread-compatible.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hachi::cli {

enum class Align : uint8_t { kLeft, kRight };

// Pads `value` to `width` columns, or cuts it to `width` keeping its first characters
// (squeue prints "whole-node" in %.8j as "whole-no"). width 0: the value as it is.
std::string FitField(std::string_view value, int width, Align align);

// One piece of a format string: literal text, or a field "%[.|-][width]code".
struct FormatItem {
  bool literal = false;
  std::string text;  // literal text
  char code = 0;
  int width = 0;  // 0: as wide as the value
  Align align = Align::kLeft;
};

// Parses "%.18i %.9P %R": '.' right-aligns (Slurm), '-' left-aligns (the default), "%%"
// is a percent sign. A code not in `known_codes` is an error naming it.
Result<std::vector<FormatItem>> ParseFormatString(std::string_view format,
                                                  std::string_view known_codes);

// One line: literals as they are, each field `value(code)` fitted to its width.
std::string RenderFormatLine(const std::vector<FormatItem>& items,
                             const std::function<std::string(char code)>& value);

// A table whose columns are as wide as their widest cell (or a fixed width, cutting
// longer cells), separated by `gap`; no trailing spaces.
class Table {
 public:
  struct Column {
    std::string title;
    Align align = Align::kLeft;
    int width = 0;  // 0: fit to content
  };

  explicit Table(std::vector<Column> columns, std::string gap = "  ")
      : columns_(std::move(columns)), gap_(std::move(gap)) {}

  // Missing cells are empty; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;  // the header line, then one line per row

 private:
  std::vector<Column> columns_;
  std::string gap_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace hachi::cli
