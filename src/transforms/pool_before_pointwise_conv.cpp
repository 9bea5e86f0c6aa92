#include "transforms/pool_before_pointwise_conv.hpp"

#include <algorithm>

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// Empty when the AveragePool `pool` and the convolution `conv` that writes its input may swap,
// else the first condition that fails.
std::string why_not(const ir::Graph& g, const ir::Node& pool, const ir::Node* conv) {
  if (!conv || conv->op_type() != "Conv" || !conv->is_onnx_domain() || conv->num_outputs() != 1)
    return "its input is not a convolution's";
  const ir::Value* y = pool.input(0);
  if (const std::string r = other_reader(g, y, &pool); !r.empty()) return cat("the convolution's output is read by ", r);
  const ir::Value* x = conv->input(0);
  const ir::Value* w = conv->input(1);
  if (!x || !w) return "the convolution has no data or weights input";
  if (x->type.dtype != DType::f32) return cat("the convolution's input is ", dtype_name(x->type.dtype), ", not f32");
  if (!x->type.shape.rank_known || x->type.shape.rank() != 4) return "the convolution is not 2-D (a rank-4 input)";
  const ir::PartialShape& ws = w->type.shape;
  const int64_t m = static_dim(w, 0), c_per_group = static_dim(w, 1);
  if (!ws.rank_known || ws.rank() != 4 || static_dim(w, 2) != 1 || static_dim(w, 3) != 1 || m < 0 || c_per_group < 0)
    return cat("the convolution's window is not 1x1 (weights ", ws.to_string(), ")");
  if (!all_equal(conv->attr_ints("strides", {1, 1}), 1)) return "the convolution's strides are not 1";
  if (!all_equal(conv->attr_ints("pads", {0, 0, 0, 0}), 0)) return "the convolution pads its input";
  // (a 1x1 window at stride 1 pads nothing under SAME_UPPER / SAME_LOWER either)
  if (!all_equal(pool.attr_ints("pads", {0, 0, 0, 0}), 0)) return "the pool pads its input";
  const std::string auto_pad = pool.attr_s("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return cat("the pool's auto_pad is ", auto_pad);
  if (pool.attr_i("ceil_mode", 0) != 0) return "the pool's ceil_mode is 1 (partial windows at the edges)";
  if (!all_equal(pool.attr_ints("dilations", {1, 1}), 1)) return "the pool's dilations are not 1";
  const std::vector<int64_t> kernel = pool.attr_ints("kernel_shape", {});
  const std::vector<int64_t> strides = pool.attr_ints("strides", {1, 1});
  if (kernel.size() != 2 || strides.size() != 2) return "the pool is not 2-D";
  const int64_t shrink = strides[0] * strides[1];
  if (shrink < 2) return "the pool's strides are 1: it would not shrink the convolution's work";
  // per output pixel: the multiply-adds saved against the pool's extra work on the input channels
  const int64_t group = std::max<int64_t>(conv->attr_i("group", 1), 1);
  const int64_t channels = c_per_group * group;
  const int64_t saved = (shrink - 1) * m * c_per_group, extra = kernel[0] * kernel[1] * (channels - m);
  if (saved <= extra)
    return cat("pooling ", channels, " channels instead of ", m, " costs more than the ", shrink,
               "x smaller convolution saves");
  return "";
}

}  // namespace

size_t average_pool_before_pointwise_conv(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* pool : g.topo_order()) {
    if (ed.erased(pool) || pool->op_type() != "AveragePool" || !pool->is_onnx_domain() || pool->num_outputs() != 1 ||
        !pool->input(0))
      continue;
    ir::Node* conv = pool->input(0)->producer();
    const std::string where = cat(conv ? conv->name() : pool->input(0)->name(), " -> ", pool->name());
    std::string reason = why_not(g, *pool, conv);
    ir::Value* z = pool->output(0);
    if (!reason.empty()) {
      if (log) log->skipped(kAveragePoolBeforePointwiseConvolution, where, reason);
      continue;
    }
    ir::Value* x = conv->input(0);
    ir::Node* early = g.add_node("AveragePool", {x}, std::vector<std::string>{g.unique_name(x->name() + "_pooled")},
                                 g.unique_name(pool->name() + "/before_conv"));
    early->attrs = pool->attrs;
    early->set_opset(pool->opset());
    ir::PartialShape pooled = z->type.shape;  // [N, C_in, OH, OW]: the pool's map, the input's channels
    if (pooled.rank_known && pooled.rank() == 4) pooled.dims[1] = x->type.shape.dims[1];
    early->output(0)->type = {DType::f32, pooled};
    std::vector<ir::Value*> ins = {early->output(0)};
    for (size_t i = 1; i < conv->num_inputs(); ++i) ins.push_back(conv->input(i));
    ir::Node* late = g.add_node("Conv", ins, std::vector<std::string>{g.unique_name(z->name() + "_conv")},
                                g.unique_name(conv->name() + "/after_pool"));
    late->attrs = conv->attrs;
    late->set_opset(conv->opset());
    late->output(0)->type = z->type;
    ed.replace_and_erase(pool, z, late->output(0));
    ed.erase(conv);
    ++count;
    if (log) log->applied(kAveragePoolBeforePointwiseConvolution, where, "the pool runs first, on the input channels");
  }
  return count;
}

}  // namespace kiln::transforms
