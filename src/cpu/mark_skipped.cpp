#include "cpu/mark_skipped.hpp"

#include <unordered_map>
#include <vector>

#include "core/strings.hpp"
#include "cpu/fusion_rules.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::cpu {

namespace {

// simple_post_ops of cpu/fusion_rules.hpp on ir node `r` reading `from`.
bool simple_layer(const ir::Node& r, const ir::Value* from, const PostOpHost& h) {
  if (!simple_post_op_kind(r)) return false;
  size_t k = r.num_inputs();
  std::vector<TensorFacts> facts(r.num_inputs());
  std::vector<const TensorFacts*> inputs(r.num_inputs(), nullptr);
  for (size_t i = 0; i < r.num_inputs(); ++i) {
    const ir::Value* v = r.input(i);
    if (!v) continue;
    if (v == from && k == r.num_inputs()) k = i;
    facts[i] = facts_of(*v);
    inputs[i] = &facts[i];
  }
  if (k == r.num_inputs() || r.num_outputs() != 1) return false;
  std::string why;
  return simple_post_ops(r, inputs, facts_of(*r.output(0)), k, h.channel_axis, &why).has_value();
}

// fuse_convolution_and_sum: the residual Add the Conv accumulates into; the tensors by
// sum_operand_ok, the rest here as the pass checks it on the runtime graph.
bool sum_layer(const ir::Graph& g, const ir::Node& r, const ir::Node& host, const ir::Value* from,
               const std::unordered_map<const ir::Node*, size_t>& pos) {
  if (r.num_inputs() != 2 || !r.input(0) || !r.input(1) || r.num_outputs() != 1) return false;
  const ir::Value* other = r.input(0) == from ? r.input(1) : r.input(0);
  std::string why;
  if (other == from || !sum_operand_ok(r, facts_of(*from), facts_of(*other), facts_of(*r.output(0)), &why)) return false;
  if (g.is_output(other)) return false;
  for (const ir::Value* in : host.inputs())
    if (in == other) return false;
  for (const ir::Use& u : other->uses())
    if (u.node != &r && pos.at(u.node) > pos.at(&r)) return false;
  return true;
}

}  // namespace

snippets::SkippedNodes mark_skipped(const ir::Graph& g, transforms::PassLog* log, const FusionTarget& target) {
  snippets::SkippedNodes skipped;
  const auto order = g.topo_order();
  std::unordered_map<const ir::Node*, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  for (const ir::Node* n : order) {
    // a BatchNormalization's ReLU (FuseBatchNormAndRelu)
    if (n->num_outputs() == 1 && n->output(0)->uses().size() == 1 && !g.is_output(n->output(0)))
      if (const ir::Node* r = n->output(0)->uses()[0].node; batch_norm_takes_relu(*n, *r) && !skipped.count(r)) {
        skipped.insert(r);
        if (log)
          log->applied(kMarkSkippedPass, cat(n->name(), " -> ", r->name()),
                       cat("left to the CPU optimizer: Relu as a post-op of ", n->name()));
        continue;
      }
    auto h = post_op_host(*n);
    if (!h) continue;
    bool summed = false;
    const ir::Value* cur = n->output(0);
    const ir::Node* prev = n;
    for (;;) {
      if (g.is_output(cur)) break;
      if (const ir::Node* mul = transforms::written_out_swish(g, cur); mul && !skipped.count(mul)) {
        const ir::Node* sig = mul->input(0) == cur ? mul->input(1)->producer() : mul->input(0)->producer();
        const int64_t elements = cur->type.shape.is_static() ? cur->type.shape.elements() : -1;
        const bool kiln_kernels = h->convolution && target.kiln_convolutions && kiln_convolution(*n);
        if (h->convolution && swish_leaves_convolution(target, elements, kiln_kernels)) {
          if (log)
            log->skipped(kMarkSkippedPass, cat(prev->name(), " -> ", mul->name()),
                         cat("Swish (", sig->name(), ", ", mul->name(), ") left to the snippets: cheaper than ", n->name(),
                             "'s swish post-op in f32 with snippets kernels"));
          break;
        }
        skipped.insert(sig);
        skipped.insert(mul);
        if (log)
          log->applied(kMarkSkippedPass, cat(prev->name(), " -> ", mul->name()),
                       cat("left to the CPU optimizer: Swish (", sig->name(), ", ", mul->name(), ") as a post-op of ", n->name()));
        prev = mul;
        cur = mul->output(0);
        continue;
      }
      if (cur->uses().size() != 1) break;
      const ir::Node* r = cur->uses()[0].node;
      if (skipped.count(r)) break;
      std::string what;
      if (simple_layer(*r, cur, *h)) {
        what = cat(r->op_type(), " as a post-op of ", n->name());
      } else if (h->convolution && !summed && sum_layer(g, *r, *n, cur, pos)) {
        summed = true;
        what = cat("the residual Add as a sum post-op of ", n->name());
      } else {
        break;
      }
      skipped.insert(r);
      if (log) log->applied(kMarkSkippedPass, cat(prev->name(), " -> ", r->name()), cat("left to the CPU optimizer: ", what));
      prev = r;
      cur = r->output(0);
    }
  }
  return skipped;
}

}  // namespace kiln::cpu
