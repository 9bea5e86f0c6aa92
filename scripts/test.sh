#!/usr/bin/env bash
# Installs dependencies, builds kiln and runs every test:
#   1. the release build's ctest suite: unit tests (natively and again with kiln capped at
#      AVX-512 without bf16, AVX2 and SSE4.1), ONNX conformance, CLI, real models (natively,
#      snippets off, AVX2, SSE4.1; made by tests/models/make_test_models.py with torch);
#   2. the unit tests (with the crafted-model regressions and the built-in ResNet-18 / BERT
#      models), the opset 18-23 conformance cases and the fuzz corpora (fuzz/) again in an
#      AddressSanitizer + UndefinedBehaviorSanitizer build (build-sanitize/), and the streams /
#      async tests and threads measuring new shapes together in a ThreadSanitizer build (build-tsan/).
# Options: --no-sanitize skips 2; anything else goes to ctest (e.g. -R unit).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=1
ctest_args=()
for a in "$@"; do
  if [ "$a" = "--no-sanitize" ]; then sanitize=0; else ctest_args+=("$a"); fi
done
JOBS="${KILN_JOBS:-2}"
# each step says when it starts, in seconds since this script did (CI's budget is 30 minutes)
step() { echo "[kiln] +${SECONDS}s: $*"; }

step "dependencies"
scripts/install_deps.sh
step "release build (build/)"
scripts/build.sh
step "ctest"
# tests that must run alone say so (RUN_SERIAL); the rest share the cores
(cd build && ctest --output-on-failure -j"$JOBS" "${ctest_args[@]}")

if [ "$sanitize" = 1 ]; then
  # The sanitizer builds: clang 14 (at -O0 with the sanitizers it compiles kiln in about half
  # g++'s time, and its UBSan also checks pointer arithmetic), -O0 (half the compile time of
  # -O1; the tests stay fast) and unity batches of 12 files (the headers parsed once a batch).
  sanitizer_build=(-G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++-14
                   -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=12
                   -DKILN_BUILD_BENCHMARKS=OFF)
  step "AddressSanitizer + UndefinedBehaviorSanitizer build (build-sanitize/)"
  cmake -S . -B build-sanitize "${sanitizer_build[@]}" -DKILN_SANITIZE=ON >/dev/null
  fuzz_targets="model tensor_proto npy pattern_json kserve_request"
  cmake --build build-sanitize -j"$JOBS" --target kiln_unit_tests kiln_conformance \
        $(for t in $fuzz_targets; do echo "fuzz_${t}_replay"; done)
  # oneDNN and libgomp keep per-thread caches alive at exit: leaks are not checked
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # the real-architecture models the release run's test_models fixture made; the unit tests in
  # $JOBS shards at once (gtest sharding): under the sanitizers most of their time is
  # instrumented code on one thread, and their temporary files are per process (temp_dir.hpp)
  step "sanitized unit tests"
  pids=()
  for ((i = 0; i < JOBS; ++i)); do
    GTEST_TOTAL_SHARDS="$JOBS" GTEST_SHARD_INDEX="$i" KILN_TEST_MODELS="$PWD/build/tests/test_models" \
      build-sanitize/tests/kiln_unit_tests --gtest_brief=1 > "build-sanitize/unit_shard_$i.log" 2>&1 &
    pids+=($!)
  done
  failed=0
  for ((i = 0; i < JOBS; ++i)); do
    if wait "${pids[$i]}"; then
      echo "[kiln] sanitized unit tests, shard $((i + 1)) of $JOBS: $(grep -E '^\[  PASSED  \]' "build-sanitize/unit_shard_$i.log")"
    else
      failed=1
      echo "[kiln] sanitized unit tests, shard $((i + 1)) of $JOBS FAILED (build-sanitize/unit_shard_$i.log):"
      tail -n 200 "build-sanitize/unit_shard_$i.log"
    fi
  done
  [ "$failed" = 0 ] || exit 1
  step "sanitized conformance (opset 18-23) and fuzz corpora"
  build-sanitize/tests/kiln_conformance --root tests/data/onnx_new --expected tests/onnx_new/expected_pass.txt
  # the fuzz corpora and the reproducers of bugs the fuzzers found (fuzz/, docs/security.md)
  for t in $fuzz_targets; do
    dirs="fuzz/corpus/$t"
    [ -d "fuzz/regressions/$t" ] && dirs="$dirs fuzz/regressions/$t"
    # shellcheck disable=SC2086
    build-sanitize/fuzz/fuzz_${t}_replay $dirs
  done
  step "ThreadSanitizer build (build-tsan/): the streams and async tests, threads measuring new shapes"
  cmake -S . -B build-tsan "${sanitizer_build[@]}" -DKILN_TSAN=ON >/dev/null
  cmake --build build-tsan -j"$JOBS" --target kiln_streams_tests
  # tests/tsan.supp: only what libgomp and oneDNN (not built with TSan) synchronise inside
  TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" \
    build-tsan/tests/kiln_streams_tests --gtest_brief=1 --gtest_filter='Streams*:UntilHotChooser.Threads*'
  step "sanitizer runs clean"
fi
