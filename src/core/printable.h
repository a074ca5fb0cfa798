// Text from other users, made safe to print on a terminal.
#pragma once

#include <string>
#include <string_view>

namespace hachi {

// A user's free text (a job's name, its comment) fit for a terminal: C0 controls, DEL
// and the C1 controls of UTF-8 (U+0080-U+009F: 0x9B is a CSI too) become "\xNN", so
// that no one's job name can move another user's cursor, retitle their terminal or hide
// lines. Other bytes, UTF-8 and backslashes included, pass as they are (what Slurm
// prints for every ordinary name).
std::string PrintableText(std::string_view s);

}  // namespace hachi
