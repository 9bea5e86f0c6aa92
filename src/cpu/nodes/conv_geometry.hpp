#pragma once
// The window of an ONNX Conv-like node (Conv, ConvInteger) in oneDNN's terms: strides,
// dilations minus one, and the left / right padding that reproduces the output size exactly
// (explicit pads or auto_pad SAME_UPPER / SAME_LOWER / VALID).
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/im2col_f32.hpp"
#include "ir/graph.hpp"

namespace kiln::cpu {

struct ConvGeometry {
  dnnl::memory::dims strides, dilations, pad_l, pad_r;  // dilations: oneDNN's (ONNX's - 1)
  dnnl::memory::dims kernel;                            // the weights' spatial dims
};

// x: [N, C, spatial...], w: [M, C/group, kernel...], y: [N, M, out spatial...].
ConvGeometry conv_geometry(const ir::Node& n, const Shape& x, const Shape& w, const Shape& y);

// The im2col geometry of a 2-D convolution (x [N, C, H, W], w [M, C, kh, kw], y [N, M, oh, ow]).
im2col_f32::Geometry im2col_geometry(const ir::Node& n, const Shape& x, const Shape& w, const Shape& y);

// The weights' dims as oneDNN takes them: w itself, or [group, M / group, C / group, kernel...].
dnnl::memory::dims conv_weight_dims(const Shape& w, int64_t group);
// The plain layout of those dims ((g)oi[d][h]w) and the channels-last one of activations with
// `spatial` (1-3) spatial dims (n[d][h]wc: what oneDNN's int8 kernels take).
dnnl::memory::format_tag plain_conv_weights_tag(size_t spatial, bool grouped);
dnnl::memory::format_tag channels_last_tag(size_t spatial);

}  // namespace kiln::cpu
