#pragma once
// The sizes a model's dynamic input dims take where nothing gives them: compile_model builds
// its first plan at them (api/core.cpp `probe_shapes`), and `kiln run` / `benchmark` / `inspect`
// run a model at them when no --shape does (tools/common/run_util.cpp `concrete_shape`), so
// what the CLI times or shows is the graph compile_model made.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln {

// A dim of a tensor whose shapes are dynamic: the first of a tensor of rank 2 or more 1 (a
// batch); the last two of a 4-D tensor 224 where `image_sizes` (an image's height and width,
// what vision models are mostly served at: a 1x1 image times a model at nothing like its use);
// any other 64 (a sequence's length, a feature count: one token times a BERT at nothing like
// its use either).
constexpr int64_t probe_dim(size_t rank, size_t index, bool image_sizes = true) {
  if (index == 0 && rank > 1) return 1;
  if (image_sizes && rank == 4 && index >= 2) return 224;
  return 64;
}

// An input larger than this at image sizes takes them with `image_sizes` false (a 4-D input
// whose channels are dynamic as well: 64 x 224 x 224 would grow the arenas beyond the sizes the
// user's shapes need, and arenas keep their largest size).
constexpr int64_t kProbeMaxElements = int64_t{1} << 20;

// Whether a shape holds more than kProbeMaxElements (without overflowing on the way).
inline bool exceeds_probe_elements(const std::vector<int64_t>& dims) {
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d > 0 && elements > kProbeMaxElements / d) return true;
    elements *= d;
  }
  return false;
}

}  // namespace kiln
