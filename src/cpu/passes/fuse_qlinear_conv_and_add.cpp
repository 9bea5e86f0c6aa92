// FuseQLinearConvAndAdd: a QuantizedConvolution whose output only a QLinearAdd reads becomes
// one convolution accumulating into the Add's other operand with oneDNN's sum post-op, the
// pair's arithmetic unchanged (quantized_convolution.hpp): the residual sum of an int8 ResNet block
// costs no pass over memory of its own. Only when the other operand has the sum's shape and
// type, is dead after the Add (every other reader runs before it) and is no graph output or
// constant: the convolution writes over it (the memory plan gives the output its buffer; were
// that impossible after all, the node copies it first).
#include "core/strings.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/nodes/quantized_convolution.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

namespace {

constexpr const char* kFuseQlinearConvAndAdd = "FuseQLinearConvAndAdd";

bool is_qlinear_add(const Node& n) {
  return n.source && n.source->op_type() == "QLinearAdd" && n.source->domain() == "com.microsoft" &&
         n.inputs.size() == 8 && n.outputs.size() == 1;
}

bool constant_scalar(const Edge* e) { return e && e->kind == Edge::Kind::constant && e->constant.size() == 1; }

}  // namespace

size_t fuse_qlinear_conv_and_add(Graph& g, transforms::PassLog* log) {
  size_t fused = 0;
  for (Node* conv : passes::nodes_of_kind(g, NodeKind::QuantizedConvolution)) {
    Node* add = passes::sole_reader(g, *conv, is_qlinear_add);
    if (!add) continue;
    Edge* out = conv->outputs.at(0);
    const std::string where = log ? passes::arrow(*conv, *add) : std::string();
    auto skip = [&](const std::string& why) {
      if (log) log->skipped(kFuseQlinearConvAndAdd, where, cat("Sum not fused: ", why));
    };
    if (g.is_graph_output(out)) {
      skip(cat(conv->name, "'s output is a graph output"));
      continue;
    }
    const bool out_is_a = add->inputs[0] == out;
    Edge* other = out_is_a ? add->inputs[3] : add->inputs[0];
    const size_t os = out_is_a ? 4 : 1;  // the other operand's scale; its zero point follows
    const size_t ms = out_is_a ? 1 : 4;  // the convolution's output's, as the Add reads it
    if (other == out) {
      skip("both operands are the convolution's output");
      continue;
    }
    Edge* sum_out = add->outputs[0];
    if (other->shape != sum_out->shape || out->shape != sum_out->shape || other->dtype != sum_out->dtype ||
        out->dtype != sum_out->dtype) {
      skip(cat("the operands ", shape_to_string(out->shape), " and ", shape_to_string(other->shape), " ",
               dtype_name(other->dtype), " do not match the sum ", shape_to_string(sum_out->shape), " ",
               dtype_name(sum_out->dtype), " (no broadcast, one type)"));
      continue;
    }
    if (!constant_scalar(add->inputs[ms]) || !constant_scalar(add->inputs[ms + 1]) || !constant_scalar(add->inputs[os]) || !constant_scalar(add->inputs[os + 1]) || !constant_scalar(add->inputs[6]) ||
        !constant_scalar(add->inputs[7])) {
      skip("the QLinearAdd's scales and zero points are not all constant scalars");
      continue;
    }
    if (std::string problem = passes::sum_target_problem(g, *conv, *add, *other); !problem.empty()) {
      skip(problem);
      continue;
    }
    auto scale = [](const Edge* e) { return static_cast<const float*>(e->constant.raw())[0]; };
    auto zp = [](const Edge* e) {
      return e->constant.dtype() == DType::u8 ? int32_t{*static_cast<const uint8_t*>(e->constant.raw())}
                                              : int32_t{*static_cast<const int8_t*>(e->constant.raw())};
    };
    QuantizedSum sum{scale(add->inputs[ms]), zp(add->inputs[ms + 1]), scale(add->inputs[os]), zp(add->inputs[os + 1]),
                     scale(add->inputs[6]), zp(add->inputs[7])};
    std::string why;
    auto* host = dynamic_cast<QuantizedSumHost*>(conv);
    if (!host || !host->take_sum(sum, &why)) {
      skip(host ? why : "the convolution takes no sum");
      continue;
    }
    g.add_input(conv, other);
    g.absorb(conv, add);
    if (log) log->applied(kFuseQlinearConvAndAdd, where, cat("accumulates into '", other->name, "'"));
    ++fused;
  }
  return fused;
}

}  // namespace kiln::cpu
