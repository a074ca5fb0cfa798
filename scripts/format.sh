#!/usr/bin/env bash
# make format / make format-check: clang-format over the C++ files git knows (tracked
# and new, not ignored), except the vendored ones under third_party/.
#   scripts/format.sh fix     rewrites them
#   scripts/format.sh check   fails, naming each file and line, on any drift
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: format.sh fix|check}
files=()
while IFS= read -r -d '' f; do
  [ -f "$f" ] && files+=("$f")  # a file deleted but not yet committed is still listed
done < <(git ls-files -z --cached --others --exclude-standard -- '*.h' '*.cc' ':!:third_party/*' | sort -zu)
case "$mode" in
  fix) clang-format -i "${files[@]}" ;;
  check)
    if ! clang-format --dry-run --Werror "${files[@]}"; then
      echo "format-check: run 'make format' ($(clang-format --version | grep -o '[0-9][0-9.]*' | head -1))" >&2
      exit 1
    fi
    echo "format-check: ${#files[@]} files clean" ;;
  *) echo "format.sh: fix or check, not '$mode'" >&2; exit 2 ;;
esac
