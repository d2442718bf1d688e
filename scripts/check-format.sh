#!/usr/bin/env bash
# Fails when a tracked C or C++ file differs from what clang-format makes of it with the repo's
# .clang-format (issue 32: the format is checked, not hoped for). Fix with:
#   git ls-files '*.c' '*.h' '*.cpp' '*.hpp' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -z '*.c' '*.h' '*.cpp' '*.hpp' | xargs -0 clang-format --dry-run -Werror
echo "check-format: $(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' | wc -l) files formatted"
