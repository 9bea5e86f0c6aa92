#!/usr/bin/env bash
# The unit tests on an emulated CPU that lacks this machine's instruction sets, so that AVX-512
# code reached on an AVX2 CPU shows as the illegal instruction a user would get, not as a pass.
# (KILN_MAX_CPU_ISA only caps what kiln and oneDNN choose: code that ignores the cap still runs
# on the build machine. tests/unit/test_cpu_isa_impls.cpp checks the names; this runs the code.)
#
# usage: scripts/test_emulated_cpu.sh [CPU_MODEL] [GTEST_FILTER]
#   CPU_MODEL: a qemu-x86_64 -cpu model (default Haswell: AVX2 and FMA, no AVX-512; Nehalem:
#              SSE4.2, no AVX)
# Each test suite runs in its own emulated process, OMP_NUM_THREADS=2; the tests of a suite that
# crashes run one by one, so the report names each test that crashed and how.
# Needs qemu-user (Debian: apt-get install qemu-user); without it, says so and exits 0.
# Known emulator limit: QEMU 7.2 faults on some AVX2 gathers that real CPUs run (oneDNN's tanh and
# GELU injectors), so a test that crashes with SIGSEGV inside JIT code is reported apart from
# an illegal instruction (SIGILL), which is always kiln's fault.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CPU="${1:-Haswell}"
FILTER="${2:-*}"
BIN="${KILN_UNIT_TESTS:-$ROOT/build/tests/kiln_unit_tests}"
QEMU="$(command -v qemu-x86_64 || true)"
if [ -z "$QEMU" ]; then
  echo "test_emulated_cpu: qemu-x86_64 not installed (apt-get install qemu-user); nothing run"
  exit 0
fi
[ -x "$BIN" ] || { echo "test_emulated_cpu: no $BIN (build first)" >&2; exit 2; }
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
export KILN_TEST_MODELS="${KILN_TEST_MODELS:-$ROOT/build/tests/test_models}"
suites=$("$BIN" --gtest_list_tests --gtest_filter="$FILTER" | awk '/^[^ ].*\.$/ {print $1}')
pass=0 fail=0 ill=0 segv=0
failed=()
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
for s in $suites; do
  ("$QEMU" -cpu "$CPU" "$BIN" --gtest_filter="${s}*" --gtest_brief=1; exit $?) > "$LOG" 2>&1  # (the shell's crash message in the log too)
  rc=$?
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1))
  elif grep -q "signal 4 (Illegal instruction)\|signal 11 (Segmentation fault)" "$LOG"; then
    # a crash ends the suite's process: run its tests one by one to name the ones that crash
    for t in $("$BIN" --gtest_list_tests --gtest_filter="${s}*" | awk '/^  / {print $1}'); do
      ("$QEMU" -cpu "$CPU" "$BIN" --gtest_filter="${s}${t}" --gtest_brief=1; exit $?) > "$LOG" 2>&1 && continue
      if grep -q "signal 4 (Illegal instruction)" "$LOG"; then
        ill=$((ill + 1)); failed+=("$s$t: ILLEGAL INSTRUCTION")
      elif grep -q "signal 11 (Segmentation fault)" "$LOG"; then
        segv=$((segv + 1)); failed+=("$s$t: SIGSEGV under the emulator (see the note above)")
      else
        fail=$((fail + 1)); failed+=("$s$t: $(grep -m3 'FAILED' "$LOG" | tr '\n' ' ')")
      fi
    done
  else
    fail=$((fail + 1)); failed+=("$s: $(grep -m3 'FAILED' "$LOG" | tr '\n' ' ')")
  fi
done
echo "emulated $CPU: $pass suites passed whole; failed: $fail, illegal instruction: $ill, emulator faults: $segv"
for f in "${failed[@]}"; do echo "  $f"; done
[ $fail -eq 0 ] && [ $ill -eq 0 ]
