#pragma once
// Picks the runtime node kind for an ir node: the first oneDNN-backed kind whose
// supports() accepts it, else Reference (the spine's kernel).
#include <memory>

#include "cpu/node.hpp"

namespace kiln::cpu {

std::unique_ptr<Node> make_node(const ir::Node& n);

// Individual kinds (one file each under src/cpu/nodes/).
std::unique_ptr<Node> make_reference_node(const ir::Node& n);
std::unique_ptr<Node> make_reorder_node(const std::string& name, dnnl::memory::desc dst);

bool view_supports(const ir::Node& n);
std::unique_ptr<Node> make_view_node(const ir::Node& n);
bool slice_view_supports(const ir::Node& n);  // a Slice / Split whose outputs are contiguous runs of its input
std::unique_ptr<Node> make_slice_view_node(const ir::Node& n);
bool slice_copy_supports(const ir::Node& n);
std::unique_ptr<Node> make_slice_copy_node(const ir::Node& n);

bool transpose_supports(const ir::Node& n);
std::unique_ptr<Node> make_transpose_node(const ir::Node& n);

bool convolution_supports(const ir::Node& n);
std::unique_ptr<Node> make_convolution_node(const ir::Node& n);
// Whether oneDNN's Winograd implementation `impl` is taken over the direct one, for an
// output of `out_pixels` (H x W), the smaller of the input and output channel counts, and
// whether a Concat reads the output as less than half of its own (convolution.cpp says
// where it measured faster).
bool winograd_pays(const std::string& impl, int64_t out_pixels, int64_t channels, bool minor_part_of_a_concat);
// MobileNet's inverted residual as one node (depthwise_block.cpp): [1x1 `expand` ->] depthwise `dw`
// [-> 1x1 `project`], Convolution nodes with their post-ops (FuseDepthwiseBlock checks the graph
// around them). depthwise_block_refuses says why kiln's kernels cannot run them ("" when they can).
std::string depthwise_block_refuses(const Node* expand, const Node& dw, const Node* project);
std::unique_ptr<Node> make_depthwise_block_node(Node* expand, Node& dw, Node* project);
bool quantized_convolution_supports(const ir::Node& n);  // QLinearConv, requantized by oneDNN
std::unique_ptr<Node> make_quantized_convolution_node(const ir::Node& n);
bool conv_integer_supports(const ir::Node& n);
bool qlinear_conv_supports(const ir::Node& n);
std::unique_ptr<Node> make_conv_integer_node(const ir::Node& n);  // ConvInteger or QLinearConv
bool fake_quantize_supports(const ir::Node& n);  // kiln FakeQuantize, constant ranges
std::unique_ptr<Node> make_fake_quantize_node(const ir::Node& n);
bool quantize_supports(const ir::Node& n);  // QuantizeLinear per tensor (dynamic_quantize.cpp)
std::unique_ptr<Node> make_quantize_node(const ir::Node& n);
bool dequantize_supports(const ir::Node& n);
std::unique_ptr<Node> make_dequantize_node(const ir::Node& n);
bool dynamic_quantize_supports(const ir::Node& n);
std::unique_ptr<Node> make_dynamic_quantize_node(const ir::Node& n);
bool cast_supports(const ir::Node& n);
std::unique_ptr<Node> make_cast_node(const ir::Node& n);
bool matmul_integer_supports(const ir::Node& n);
bool qlinear_matmul_supports(const ir::Node& n);
bool matmul_integer_to_float_supports(const ir::Node& n);  // com.microsoft MatMulIntegerToFloat
std::unique_ptr<Node> make_matmul_integer_node(const ir::Node& n);  // MatMulInteger, QLinearMatMul, MatMulIntegerToFloat
bool if_supports(const ir::Node& n);
std::unique_ptr<Node> make_if_node(const ir::Node& n);
bool squeeze_excite_supports(const ir::Node& n);  // kiln SqueezeExcite (FuseSqueezeExcite)
std::unique_ptr<Node> make_squeeze_excite_node(const ir::Node& n);
bool pooling_supports(const ir::Node& n);
std::unique_ptr<Node> make_pooling_node(const ir::Node& n);
bool batch_norm_supports(const ir::Node& n);
std::unique_ptr<Node> make_batch_norm_node(const ir::Node& n);
// A BatchNorm node's y = x * a + b per channel (a = scale / sqrt(var + eps), b = B - mean * a,
// folded in double as the reference kernel does, stored f32) and its fused ReLU.
Node::ChannelAffine batch_norm_affine(Node& bn);
bool concat_supports(const ir::Node& n);
std::unique_ptr<Node> make_concat_node(const ir::Node& n);
bool lrn_supports(const ir::Node& n);
std::unique_ptr<Node> make_lrn_node(const ir::Node& n);
bool deconvolution_supports(const ir::Node& n);
std::unique_ptr<Node> make_deconvolution_node(const ir::Node& n);
bool resize_supports(const ir::Node& n);
std::unique_ptr<Node> make_resize_node(const ir::Node& n);
bool fully_connected_supports(const ir::Node& n);
std::unique_ptr<Node> make_fully_connected_node(const ir::Node& n);
bool matmul_supports(const ir::Node& n);
std::unique_ptr<Node> make_matmul_node(const ir::Node& n);
bool softmax_supports(const ir::Node& n);
std::unique_ptr<Node> make_softmax_node(const ir::Node& n);
bool layer_norm_supports(const ir::Node& n);
std::unique_ptr<Node> make_layer_norm_node(const ir::Node& n);
bool reduce_supports(const ir::Node& n);
std::unique_ptr<Node> make_reduce_node(const ir::Node& n);
bool eltwise_supports(const ir::Node& n);
std::unique_ptr<Node> make_eltwise_node(const ir::Node& n);
bool attention_supports(const ir::Node& n);
std::unique_ptr<Node> make_attention_node(const ir::Node& n);
bool subgraph_supports(const ir::Node& n);
std::unique_ptr<Node> make_subgraph_node(const ir::Node& n);
bool lstm_supports(const ir::Node& n);
std::unique_ptr<Node> make_lstm_node(const ir::Node& n);
bool gru_supports(const ir::Node& n);
bool instance_norm_supports(const ir::Node& n);
std::unique_ptr<Node> make_instance_norm_node(const ir::Node& n);
std::unique_ptr<Node> make_gru_node(const ir::Node& n);
bool binary_supports(const ir::Node& n);
std::unique_ptr<Node> make_binary_node(const ir::Node& n);

}  // namespace kiln::cpu
