#pragma once
// AveragePoolBeforePointwiseConvolution: AveragePool(Conv1x1(x)) is Conv1x1(AveragePool(x)).
// A 1x1 convolution at stride 1 maps each pixel on its own, linearly (W x + b), and an average
// pool's weights over a window sum to 1, so the two commute, the bias included. Pooling first,
// the convolution runs on the pooled pixels: a stride-2 pool leaves it a quarter of its work.
// DenseNet's transitions (BatchNorm, ReLU, 1x1 convolution, 2x2 average pool at stride 2) are
// the pattern; the pool then averages the convolution's input channels instead of its outputs.
// Conditions: the convolution 2-D (rank-4 input), a 1x1 window, strides 1, no padding, read by
// the pool alone; the pool without padding (pads 0 or auto_pad VALID), ceil_mode 0 and
// dilations 1, so that every window is whole and averages the same number of pixels; its
// strides shrink the map (product 2 or more); and the work saved, (stride product - 1) x the
// convolution's multiply-adds per output pixel, more than the pool's extra work on the input
// channels.
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::transforms {

inline constexpr const char* kAveragePoolBeforePointwiseConvolution = "AveragePoolBeforePointwiseConvolution";

// Returns the number of pairs swapped; `log` may be null.
size_t average_pool_before_pointwise_conv(ir::Graph& g, PassLog* log);

}  // namespace kiln::transforms
