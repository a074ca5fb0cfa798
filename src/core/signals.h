// Signal names as Slurm's commands take them (sbatch --signal, scancel --signal, the
// API's POST /jobs/ID/signal): "USR1", "SIGUSR1", "usr1" or a number. Pure functions;
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hachi {

// The signal's number: a name (with or without "SIG", any case) of the usual POSIX
// signals, or a number 1..64. nullopt for anything else (0 included: it is no signal).
std::optional<int> ParseSignal(std::string_view text);
// "USR1" for 10; the number as text for a signal without a name here.
std::string SignalName(int sig);

}  // namespace hachi
