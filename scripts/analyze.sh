#!/usr/bin/env bash
# make analyze: Clang's thread-safety analysis over Hachi's sources (core/mutex.h,
# core/thread_annotations.h). GCC builds the shipped binary and ignores the annotations;
# this runs clang-14 -fsyntax-only -Wthread-safety -Werror on every non-test source file
# in src/, with the compile flags CMake recorded for it (BUILD/compile_commands.json), so
# a member read without its GUARDED_BY mutex, or a REQUIRES function called without the
# lock, fails `make test`. It first checks that the analysis is on at all: a file that
# breaks a lock contract on purpose (src/core/testdata/thread_safety_violation.cc) must
# be refused.
#
#   scripts/analyze.sh BUILD
set -euo pipefail
build=${1:?usage: analyze.sh BUILD}
root=$(cd "$(dirname "$0")/.." && pwd)
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "analyze: no $db (configure the build first)" >&2; exit 2; }
clang=${CLANGXX:-clang++-14}
command -v "$clang" >/dev/null || { echo "analyze: $clang not found (scripts/install-deps.sh)" >&2; exit 2; }
flags=(-fsyntax-only -Wthread-safety -Wthread-safety-beta -Werror=thread-safety
       -Wno-unknown-warning-option)

# One line per file: the directory, then the command's arguments NUL-separated, with
# the compiler, -o and its argument, -c and its argument, and GCC-only flags dropped.
list=$(mktemp)
trap 'rm -f "$list"' EXIT
python3 - "$db" "$root" >"$list" <<'EOF'
import json, os, shlex, sys
db, root = sys.argv[1], sys.argv[2]
src = os.path.join(root, "src") + os.sep
gcc_only = ("-Wimplicit-fallthrough=", "-fasynchronous-unwind-tables")
for e in json.load(open(db)):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if not f.startswith(src) or f.endswith("_test.cc") or "/testdata/" in f:
        continue
    if not os.path.exists(f):  # removed since the build was configured
        continue
    args = e.get("arguments") or shlex.split(e["command"])
    if args and os.path.basename(args[0]) == "ccache":
        args = args[1:]
    out, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-MD", "-MMD") or a.startswith(gcc_only) or a == "-Werror":
            continue
        out.append(a)
    print(e["directory"] + "\t" + "\x1f".join(out) + "\t" + f)
EOF

# The canary: a contract broken on purpose must be caught, or the check is off.
canary="$root/src/core/testdata/thread_safety_violation.cc"
if "$clang" -std=c++20 -I"$root/src" "${flags[@]}" "$canary" 2>/dev/null; then
  echo "analyze: $canary compiled: the thread-safety analysis is not working" >&2
  exit 1
fi

n=$(wc -l <"$list")
export clang
export flags_str="${flags[*]}"
fail=0
# Two at a time (the machine has two cores); each file's own output, then a verdict.
while IFS=$'\t' read -r dir args file; do
  printf '%s\t%s\t%s\0' "$dir" "$args" "$file"
done <"$list" | xargs -0 -P "${JOBS:-2}" -n 1 bash -c '
  IFS=$'"'"'\t'"'"' read -r dir args file <<<"$1"
  IFS=$'"'"'\x1f'"'"' read -r -a a <<<"$args"
  read -r -a f <<<"$flags_str"
  cd "$dir" && "$clang" "${a[@]}" "${f[@]}" "$file" || { echo "analyze: FAILED $file" >&2; exit 255; }
' _ || fail=1
if [ "$fail" -ne 0 ]; then
  echo "analyze: thread-safety analysis failed (above)" >&2
  exit 1
fi
echo "analyze: $n files clean (clang-14 -Wthread-safety)"
