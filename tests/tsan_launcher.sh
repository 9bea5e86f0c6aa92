#!/usr/bin/env bash
# Compiler launcher for the ThreadSanitizer build (docs/settings.md):
#   cmake -S . -B build-tsan -G Ninja -DCMAKE_CXX_FLAGS=-fsanitize=thread \
#         -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/tests/tsan_launcher.sh ...
# Compiles sources that use GCC's target_clones (src/ops/fast_erf.cpp) without
# -fsanitize=thread: their ifunc resolvers run while the dynamic loader relocates the
# binary, before the TSan runtime is initialised, and crash when instrumented. Those
# kernels then run uninstrumented, like oneDNN and libgomp.
src=""
prev=""
for a in "$@"; do
  [[ $prev == -c ]] && src=$a
  prev=$a
done
if [[ -n $src && -f $src ]] && grep -q target_clones "$src"; then
  args=()
  for a in "$@"; do [[ $a == -fsanitize=thread ]] || args+=("$a"); done
  exec "${args[@]}"
fi
exec "$@"
