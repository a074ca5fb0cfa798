// Slurm's column printer (src/common/print_fields.c), which sshare, sacctmgr and
// sreport share: a field list ("Account,User%12"), a header cut to each width and a
// line of dashes, right-aligned columns (negative width: left), every field followed by
// one space; a string wider than its column keeps width-1 characters and a '+', a
// number is never cut, a double is "%*f" (or "%.*e" when that is too wide); -p ends
// every field with '|', -P separates them with '|'; -n prints no header.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/slurm/slurm_text.h"
#include "core/status.h"

namespace hachi::cli::slurm {

struct FieldDef {
  std::string_view name;      // the header
  int width;                  // negative: left-aligned
  std::string_view key = {};  // the name a field list uses when not the header
  std::string_view Key() const { return key.empty() ? name : key; }
};

// A field of a list: which FieldDef, and its width (FieldDef's unless "%N" said).
struct FieldColumn {
  int def = 0;
  int width = 0;
};

enum class FieldMatch : uint8_t {
  kExact,   // sacct: the name, any case
  kPrefix,  // sshare, sacctmgr: any case-insensitive prefix, the first in table order
};

// "A,User%12 RawShares": `defs` resolved; an unknown name is Slurm's
// `Invalid field requested: "NAME"`.
Result<std::vector<FieldColumn>> ParseFieldList(std::string_view spec,
                                                std::span<const FieldDef> defs,
                                                FieldMatch match);

// One value: a string (cut with '+'), a number (never cut), a double (6 decimals), or
// unset (blank; empty when parsable).
struct FieldValue {
  enum Kind : uint8_t { kUnset, kString, kNumber, kDouble } kind = kUnset;
  std::string text;   // kString, kNumber
  double number = 0;  // kDouble
  static FieldValue Unset() { return {}; }
  static FieldValue Str(std::string s) { return {kString, std::move(s), 0}; }
  static FieldValue Num(long long n) { return {kNumber, std::to_string(n), 0}; }
  static FieldValue Dbl(double d) { return {kDouble, "", d}; }
};

enum class Parsable : uint8_t {
  kNo,        // columns
  kEnding,    // -p: "a|b|"
  kNoEnding,  // -P: "a|b"
};

struct FieldOutput {
  Parsable parsable = Parsable::kNo;
  bool header = true;  // false: -n
};

// The output options as the commands name them: "noheader" (-n, and sshare's -h),
// "parsable" (-p), "parsable2" (-P).
FieldOutput FieldOutputOf(const ParsedArgs& p);

// The header (unless !out.header) and one line per row, each row one value per column.
std::string PrintFields(const std::vector<FieldColumn>& cols,
                        std::span<const FieldDef> defs,
                        const std::vector<std::vector<FieldValue>>& rows,
                        FieldOutput out);

}  // namespace hachi::cli::slurm
