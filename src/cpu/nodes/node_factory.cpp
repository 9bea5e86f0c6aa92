#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

std::unique_ptr<Node> make_node(const ir::Node& n) {
  if (view_supports(n)) return make_view_node(n);
  if (slice_view_supports(n)) return make_slice_view_node(n);
  if (slice_copy_supports(n)) return make_slice_copy_node(n);
  if (convolution_supports(n)) return make_convolution_node(n);
  if (deconvolution_supports(n)) return make_deconvolution_node(n);
  if (quantized_convolution_supports(n)) return make_quantized_convolution_node(n);
  if (conv_integer_supports(n) || qlinear_conv_supports(n)) return make_conv_integer_node(n);
  if (quantize_supports(n)) return make_quantize_node(n);
  if (fake_quantize_supports(n)) return make_fake_quantize_node(n);
  if (dequantize_supports(n)) return make_dequantize_node(n);
  if (dynamic_quantize_supports(n)) return make_dynamic_quantize_node(n);
  if (matmul_integer_supports(n) || qlinear_matmul_supports(n) || matmul_integer_to_float_supports(n))
    return make_matmul_integer_node(n);
  if (if_supports(n)) return make_if_node(n);
  if (cast_supports(n)) return make_cast_node(n);
  if (transpose_supports(n)) return make_transpose_node(n);
  if (pooling_supports(n)) return make_pooling_node(n);
  if (squeeze_excite_supports(n)) return make_squeeze_excite_node(n);
  if (batch_norm_supports(n)) return make_batch_norm_node(n);
  if (concat_supports(n)) return make_concat_node(n);
  if (lrn_supports(n)) return make_lrn_node(n);
  if (resize_supports(n)) return make_resize_node(n);
  if (fully_connected_supports(n)) return make_fully_connected_node(n);
  if (matmul_supports(n)) return make_matmul_node(n);
  if (softmax_supports(n)) return make_softmax_node(n);
  if (attention_supports(n)) return make_attention_node(n);
  if (subgraph_supports(n)) return make_subgraph_node(n);
  if (layer_norm_supports(n)) return make_layer_norm_node(n);
  if (reduce_supports(n)) return make_reduce_node(n);
  if (eltwise_supports(n)) return make_eltwise_node(n);
  if (binary_supports(n)) return make_binary_node(n);
  if (lstm_supports(n)) return make_lstm_node(n);
  if (gru_supports(n)) return make_gru_node(n);
  if (instance_norm_supports(n)) return make_instance_norm_node(n);
  return make_reference_node(n);
}

}  // namespace kiln::cpu
