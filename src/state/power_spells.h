// A burst node's powered spells (docs/pools.md): from the start of a resume until the
// node is off again — what a cloud bills, whether jobs used the node or not. The server
// writes a spell when it begins, moves its `until` on every usage_flush_s while it
// lasts, and closes it when the node is off; a server that starts (or a standby that
// takes over) reads the open ones back and goes on with them, or closes them where they
// were last known powered. These are measurements beside the records, not edits: Load
// never reads them, the month's figures do (GET /pools).
//
// The rows are JSON with a version ("_v", "_min_reader", as state/row_codec.h says for
// the other tables). Plain values and pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace hachi::state {

struct PowerSpell {
  std::string node;
  Time since = 0;  // the resume's start; with `node`, the row's key
  Time until = 0;  // closed: when the node was off; open: when last known powered
  bool open = true;
  std::string pool;
  int gpus = 0;
  double price_per_gpu_hour = 0;  // the pool's price when the spell began
  bool operator==(const PowerSpell&) const = default;
};

// The row's key as its checksum covers it and errors name it: "b1@1700000000".
std::string PowerSpellKey(const PowerSpell& s);
// The spell's GPU-seconds inside [from, to), counting an open spell as lasting until
// its `until`.
double SpellGpuSeconds(const PowerSpell& s, Time from, Time to);

std::string PowerSpellToJson(const PowerSpell& s);
// An error names the field ("power.gpus: expected an integer, got string") or the
// version a newer row needs.
Result<PowerSpell> PowerSpellFromJson(std::string_view text);

}  // namespace hachi::state
