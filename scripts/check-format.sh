#!/usr/bin/env bash
# Fails when a C++ file differs from what clang-format (with the committed .clang-format) makes of it.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find . -name '*.cpp' -o -name '*.hpp')
(( ${#files[@]} )) || exit 0
clang-format --dry-run --Werror "${files[@]}"
