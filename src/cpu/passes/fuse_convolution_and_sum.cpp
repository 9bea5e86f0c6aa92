// FuseConvolutionAndSum: Convolution (with its post-ops) -> Add(other) -> simple layers
// becomes one Convolution with a sum post-op, accumulating into `other`'s buffer, plus
// the simple layers after the sum. Only when `other` is dead after the Add (every other
// reader runs before it) and is no graph input, output or constant: the convolution
// writes over it. (The memory plan then gives the output `other`'s buffer; were that
// impossible after all, e.g. a layout change, the node copies `other` first.)
#include "core/strings.hpp"
#include "cpu/fusion_rules.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

namespace {

constexpr const char* kFuseConvolutionAndSum = "FuseConvolutionAndSum";

bool is_add(const Node& n) {
  return n.source && n.source->op_type() == "Add" && n.source->is_onnx_domain() &&
         n.inputs.size() == 2 && n.inputs[0] && n.inputs[1] && n.outputs.size() == 1;
}

}  // namespace

size_t fuse_convolution_and_sum(Graph& g, transforms::PassLog* log) {
  std::vector<Node*> convs;
  for (auto& n : g.nodes())
    if (n->kind() == NodeKind::Convolution) convs.push_back(n.get());
  size_t fused = 0;
  for (Node* conv : convs) {
    if (conv->outputs.size() != 1 || conv->post_ops()->sum_input() >= 0) continue;
    Edge* out = conv->outputs[0];
    auto readers = g.consumers(out);
    if (readers.size() != 1 || !is_add(*readers[0])) continue;
    Node* add = readers[0];
    const std::string where = log ? passes::arrow(*conv, *add) : std::string();
    auto skip = [&](const std::string& why) {
      if (log) log->skipped(kFuseConvolutionAndSum, where, cat("Sum not fused: ", why));
    };
    if (g.is_graph_output(out)) {
      skip(cat(conv->name, "'s output is a graph output"));
      continue;
    }
    Edge* other = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
    if (other == out) {
      skip("both operands are the convolution's output");
      continue;
    }
    std::string why;
    if (!sum_operand_ok(*add->source, facts_of(*out), facts_of(*other), facts_of(*add->outputs[0]), &why)) {
      skip(why);  // cpu/fusion_rules.hpp
      continue;
    }
    if (std::string problem = passes::sum_target_problem(g, *conv, *add, *other); !problem.empty()) {
      skip(problem);
      continue;
    }
    PostOp sum;
    sum.kind = PostOp::Kind::sum;
    sum.input = static_cast<int>(conv->inputs.size());
    sum.from = add->name;
    if (!conv->accepts_post_ops({sum}, &why)) {
      skip(why);
      continue;
    }
    conv->post_ops()->ops.push_back(sum);
    g.add_input(conv, other);
    g.absorb(conv, add);
    if (log) log->applied(kFuseConvolutionAndSum, where, cat("accumulates into '", other->name, "'"));
    ++fused;
    fused += passes::fuse_simple_chain(g, conv, kFuseConvolutionAndSum, 1, log);
  }
  return fused;
}

}  // namespace kiln::cpu
