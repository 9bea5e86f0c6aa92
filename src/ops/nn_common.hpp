#pragma once
// Shared helpers of the "nn" op family (nn*.cpp): sliding-window geometry for Conv,
// ConvTranspose and the pools, and element-type conversion for the float kernels.
#include <kiln/tensor.hpp>

#include <string>
#include <type_traits>
#include <vector>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"

namespace kiln::ops::nn {

void register_conv_ops(ir::OpRegistry& r);  // nn_conv.cpp
void register_pool_ops(ir::OpRegistry& r);  // nn_pool.cpp
void register_norm_ops(ir::OpRegistry& r);  // nn_norm.cpp
void register_attention_ops(ir::OpRegistry& r);  // nn_attention.cpp: kiln MultiHeadAttention
void register_squeeze_excite_ops(ir::OpRegistry& r);  // nn_squeeze_excite.cpp: kiln SqueezeExcite
void register_attention23_ops(ir::OpRegistry& r);  // nn_attention23.cpp: Attention, RotaryEmbedding (opset 23)

// Window attributes of a Conv / pool node for `nsp` spatial dims.
struct Window {
  size_t nsp = 0;
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads;  // begin_0..begin_{n-1}, end_0..end_{n-1}
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

// Attribute checks shared by every windowed op (for OpSchema::validate).
void validate_window_attrs(const ir::Node& n);

// Reads the window attributes. `kernel` is used when there is no kernel_shape attribute
// (Conv: the spatial dims of W); throws if the sizes do not match nsp.
Window read_window(const ir::Node& n, size_t nsp, const std::vector<int64_t>& kernel);

// Output size of spatial dim i for a concrete input size; resolves auto_pad into
// w.pads. Throws an error naming the node when the window does not fit.
int64_t window_output_size(const ir::Node& n, Window& w, size_t i, int64_t in);

// Resolves every spatial dim: returns the output spatial dims.
std::vector<int64_t> window_output(const ir::Node& n, Window& w, const std::vector<int64_t>& in);

// Static version: static dims are computed, a symbolic dim passes through when the
// window preserves size, anything else is unknown. Never throws for unknowns.
ir::Dim window_output_dim(const ir::Node& n, const Window& w, size_t i, const ir::Dim& in);

// Spatial geometry normalised to exactly 3 dims (leading unit dims for 1-D / 2-D).
struct Geom3 {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, p[3] = {0, 0, 0};  // p = begin pads
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};
Geom3 make_geom3(const ir::Node& n, const Window& w, const std::vector<int64_t>& in,
                 const std::vector<int64_t>& out);

// [o0, o1): the outputs o in [0, out) whose input o*s + off lies in [0, in).
inline void valid_range(int64_t in, int64_t out, int64_t s, int64_t off, int64_t& o0, int64_t& o1) {
  o0 = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t hi = in - 1 - off;
  o1 = hi < 0 ? 0 : std::min(out, hi / s + 1);
  if (o1 < o0) o1 = o0;
}

// Spatial dims of a concrete shape (everything after N, C).
inline std::vector<int64_t> spatial_of(const Shape& s) { return std::vector<int64_t>(s.begin() + 2, s.end()); }

// Computation type of a float element type: double for double, float otherwise.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Data of `t` (element type T) as A: a direct pointer when T == A, else converted into buf.
template <typename A, typename T>
const A* as_acc(const Tensor& t, std::vector<A>& buf) {
  const T* p = t.data<T>();
  if constexpr (std::is_same_v<A, T>) {
    return p;
  } else {
    buf.resize(static_cast<size_t>(t.size()));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<A>(static_cast<float>(p[i]));
    return buf.data();
  }
}

// Values of any numeric tensor as float (per-channel parameters, scales).
std::vector<float> to_f32(const Tensor& t);

}  // namespace kiln::ops::nn
