#!/usr/bin/env bash
# The unit tests build in unity batches (tests/CMakeLists.txt): every tests/unit/*.cpp keeps its
# code in a namespace named after the file (`namespace test_x {` or `namespace kiln::test::test_x {`),
# so that helpers of the same short name in two files do not collide. Lists the files that do not.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
for f in tests/unit/*.cpp; do
  ns=$(basename "$f" .cpp)
  if ! grep -Eq "^namespace (kiln::test::)?${ns} \{" "$f"; then
    echo "$f: its code is not in namespace ${ns} (or kiln::test::${ns})"
    bad=$((bad + 1))
  fi
done
echo "test namespaces: ${bad} files without their own"
[ "$bad" = 0 ]
