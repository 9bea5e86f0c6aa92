#include <algorithm>

#include <kiln/error.hpp>

#include "ir/graph.hpp"
#include "ir/infer_util.hpp"
#include "snippets/pass/data_flow_passes.hpp"

namespace kiln::snippets::pass {

// A Transpose of a body input that keeps the last dim last is a way of reading that input:
// its rows in another order, each row still contiguous. The Transpose goes; the input's perm
// is returned (the schedule steps through its memory in that order and PropagateLayout gives
// the Loads its strides). Inputs also read untransposed, or through different perms, stay.
std::vector<std::vector<int64_t>> fuse_transposes_into_parameters(ir::Graph& body) {
  std::vector<std::vector<int64_t>> perms(body.inputs().size());
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    ir::Value* in = body.inputs()[i];
    if (in->uses().empty() || body.is_output(in) || !in->type.shape.rank_known) continue;
    const size_t rank = in->type.shape.rank();
    std::vector<ir::Node*> ts;
    std::vector<int64_t> perm;
    bool ok = rank >= 1;
    for (const ir::Use& u : in->uses()) {
      ir::Node* t = u.node;
      if (t->op_type() != "Transpose" || !t->is_onnx_domain()) {
        ok = false;
        break;
      }
      std::vector<int64_t> p;
      try {
        p = ir::transpose_perm(*t, rank);
      } catch (const Error&) {  // not a permutation: shape inference reports it, the Transpose stays
        ok = false;
        break;
      }
      if (ts.empty()) perm = p;
      if (p != perm) ok = false;
      if (std::find(ts.begin(), ts.end(), t) == ts.end()) ts.push_back(t);
    }
    ok = ok && perm.size() == rank && perm.back() == static_cast<int64_t>(rank) - 1;
    if (!ok) continue;
    for (ir::Node* t : ts) {
      body.replace_all_uses(t->output(0), in);
      body.erase_node(t);
    }
    perms[i] = perm;
  }
  return perms;
}

}  // namespace kiln::snippets::pass
