#!/usr/bin/env bash
# CTest splits test names at ';' (a CMake list separator), so such a Catch2 test would be
# registered under a truncated name, match nothing, and "pass" without running. Refuse them.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 TEST_EXECUTABLE..." >&2
  exit 2
fi
bad=0
for exe in "$@"; do
  while IFS= read -r name; do
    case "$name" in
      *";"*) echo "$(basename "$exe"): test name contains ';': $name" >&2; bad=1 ;;
      -*) echo "$(basename "$exe"): test name starts with '-': $name" >&2; bad=1 ;;
    esac
  done < <("$exe" --list-test-names-only)
done
exit $bad
