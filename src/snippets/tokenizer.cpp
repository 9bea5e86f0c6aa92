#include "snippets/tokenizer.hpp"

#include <functional>

#include "snippets/generator.hpp"
#include "snippets/op.hpp"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "core/strings.hpp"
#include "ir/infer_util.hpp"
#include "ir/op_registry.hpp"
#include "snippets/subgraph_op.hpp"

namespace kiln::snippets {

namespace {

bool f32(const ir::Value* v) { return v && v->type.dtype == DType::f32; }

// A one-element constant: copied into the body instead of becoming an input.
bool scalar_constant(const ir::Value* v) {
  return v && v->is_constant() && !v->producer() && v->constant().size() == 1;
}

// A lone op worth a kernel of its own: a binary op broadcasting one computed tensor over
// another (an SE block's per-channel scale): oneDNN 2.6's binary primitive runs that about
// 2.7x slower in channels-last (EfficientNet-B0's 16 such Muls: 0.42 vs 0.16 ms as Subgraphs).
// In a layout the kernel cannot run in, the Subgraph node hands it back to oneDNN. Also GELU and
// hard-swish (what the pattern library makes of their primitives): as fast as oneDNN's eltwise
// (1x64x256x256: 2.26 vs 2.21 ms, 1.16 vs 1.13 ms), and the spec wants their primitives in one
// Subgraph.
bool lone_worth_a_kernel(const ir::Node& n) {
  const std::string& op = n.op_type();
  if ((op == "Gelu" && (n.is_onnx_domain() || n.domain() == "com.microsoft")) || (op == "HardSwish" && n.is_onnx_domain()))
    return n.num_inputs() == 1 && n.num_outputs() == 1;
  if (!n.is_onnx_domain() || n.num_inputs() != 2 || n.num_outputs() != 1) return false;
  if (op != "Add" && op != "Sub" && op != "Mul" && op != "Div" && op != "Max" && op != "Min") return false;
  const ir::Value *a = n.input(0), *b = n.input(1);
  if (!a || !b || a == b || a->is_constant() || b->is_constant()) return false;
  // On symbolic shapes (a model's template, tokenized once for every shape): broadcasting
  // unless both have the same dims (equal numbers, or the same named symbol). Where other dims
  // turn out equal, the kernel runs without broadcasting: correct, one node more than the static
  // shapes would have made.
  const ir::PartialShape &sa = a->type.shape, &sb = b->type.shape;
  if (!sa.rank_known || !sb.rank_known) return false;
  if (sa.rank() != sb.rank()) return true;
  for (size_t i = 0; i < sa.dims.size(); ++i)
    if (sa.dims[i].is_unknown() || !(sa.dims[i] == sb.dims[i])) return true;
  return false;
}

// The tokenizer's working state: clusters of nodes that will become one Subgraph each.
class Tokenizer {
 public:
  Tokenizer(ir::Graph& g, const SkippedNodes& skipped, transforms::PassLog* log, size_t max_ptrs)
      : g_(g), skipped_(skipped), log_(log), max_ptrs_(max_ptrs) {}

  size_t run() {
    order_ = g_.topo_order();
    for (size_t i = 0; i < order_.size(); ++i) pos_[order_[i]] = i;
    for (ir::Node* n : order_) visit(n);
    size_t made = 0;
    for (auto& c : clusters_) {
      if (c.empty()) continue;
      if (c.size() < 2 && !lone_worth_a_kernel(*c[0])) {
        if (log_) log_->skipped(kTokenizationPass, c[0]->name(), "a lone op gains nothing from a subgraph");
        continue;
      }
      std::sort(c.begin(), c.end(), [&](ir::Node* a, ir::Node* b) { return pos_.at(a) < pos_.at(b); });
      if (const std::string why = boundary_problem(c); !why.empty()) {
        if (log_) log_->skipped(kTokenizationPass, c[0]->name(), why);
        continue;
      }
      materialize(c);
      ++made;
    }
    return made;
  }

 private:
  static constexpr int kNone = -1;
  static constexpr size_t kMaxSubgraphOps = 256;

  int cluster(const ir::Node* n) const {
    auto it = cluster_of_.find(n);
    return it == cluster_of_.end() ? kNone : it->second;
  }

  void visit(ir::Node* n) {
    if (!tokenizable(*n)) return;
    if (skipped_.count(n)) {
      if (log_) log_->skipped(kTokenizationPass, n->name(), "left to the CPU optimizer (marked by SnippetsMarkSkipped)");
      return;
    }
    std::vector<int> producers;
    for (const ir::Value* v : n->inputs()) {
      if (!v || !v->producer()) continue;
      int c = cluster(v->producer());
      if (c != kNone && std::find(producers.begin(), producers.end(), c) == producers.end()) producers.push_back(c);
    }
    if (producers.empty()) {
      start(n);
      return;
    }
    std::vector<std::vector<int>> tries = {producers};
    if (producers.size() > 1)
      for (int c : producers) tries.push_back({c});
    std::string first_why;
    for (const auto& ids : tries) {
      std::string why = refuse(ids, n);
      if (why.empty()) {
        if (!first_why.empty() && log_)
          log_->skipped(kTokenizationPass, n->name(),
                        cat("does not merge all its producers' subgraphs (", first_why, "); joins the one of ",
                            clusters_[static_cast<size_t>(ids[0])][0]->name()));
        merge_into(ids, n);
        return;
      }
      if (first_why.empty()) first_why = why;
    }
    if (log_) log_->skipped(kTokenizationPass, n->name(), cat("starts a new subgraph: ", first_why));
    start(n);
  }

  void start(ir::Node* n) {
    cluster_of_[n] = static_cast<int>(clusters_.size());
    clusters_.push_back({n});
  }

  void merge_into(const std::vector<int>& ids, ir::Node* n) {
    const int into = ids[0];
    for (size_t k = 1; k < ids.size(); ++k) {
      for (ir::Node* m : clusters_[static_cast<size_t>(ids[k])]) {
        cluster_of_[m] = into;
        clusters_[static_cast<size_t>(into)].push_back(m);
      }
      clusters_[static_cast<size_t>(ids[k])].clear();
    }
    cluster_of_[n] = into;
    clusters_[static_cast<size_t>(into)].push_back(n);
  }

  // Empty when clusters `ids` plus node `n` may become one subgraph; else why not.
  std::string refuse(const std::vector<int>& ids, const ir::Node* n) const {
    // 0. Size: each check below walks the candidate, and lowering a body costs more than
    // linear in its size; a bound keeps tokenizing and compiling a long chain of
    // elementwise ops linear in the graph (a 4000-op chain: 5.5 s -> under 0.1 s)
    size_t size = 1;
    for (int id : ids) size += clusters_[static_cast<size_t>(id)].size();
    if (size > kMaxSubgraphOps)
      return cat("the subgraph would have ", size, " ops, more than ", kMaxSubgraphOps, " (a bound on compile time)");
    auto in_candidate = [&](const ir::Node* x) {
      if (x == n) return true;
      const int c = cluster(x);
      return c != kNone && std::find(ids.begin(), ids.end(), c) != ids.end();
    };
    std::vector<const ir::Node*> members;
    for (int id : ids)
      for (const ir::Node* m : clusters_[static_cast<size_t>(id)]) members.push_back(m);
    members.push_back(n);

    // 1. Cycles: a path from the candidate through an outside node back into it. Other
    // clusters will become single nodes, so reaching one reaches all of its outputs.
    // Nodes after n in topological order cannot lead back to the candidate.
    const size_t limit = pos_.at(n);
    std::unordered_set<const ir::Node*> seen;
    std::unordered_set<int> seen_clusters;
    std::vector<const ir::Node*> stack;
    auto push_consumers = [&](const ir::Node* x) {
      for (const ir::Value* o : x->outputs())
        for (const ir::Use& u : o->uses())
          if (seen.insert(u.node).second) stack.push_back(u.node);
    };
    for (const ir::Node* m : members)
      if (m != n)
        for (const ir::Value* o : m->outputs())
          for (const ir::Use& u : o->uses())
            if (!in_candidate(u.node) && seen.insert(u.node).second) stack.push_back(u.node);
    while (!stack.empty()) {
      const ir::Node* x = stack.back();
      stack.pop_back();
      if (in_candidate(x)) return cat("joining would create a cycle (a path leaves the subgraph and comes back at ",
                                      x->name(), ")");
      const int c = cluster(x);
      if (c != kNone) {
        if (seen_clusters.insert(c).second)
          for (const ir::Node* m : clusters_[static_cast<size_t>(c)]) push_consumers(m);
      } else if (pos_.at(x) < limit) {
        push_consumers(x);
      }
    }

    // 2. At most one graph-output (Result) consumer.
    size_t results = 0;
    for (const ir::Value* o : g_.outputs())
      results += o->producer() && in_candidate(o->producer());
    if (results > 1) return cat("the subgraph would feed ", results, " graph outputs (at most 1)");

    // 3. Data pointers: distinct inputs (not made inside, not one-value constants) + outputs.
    std::unordered_set<const ir::Value*> inputs;
    size_t outputs = 0;
    for (const ir::Node* m : members) {
      for (const ir::Value* v : m->inputs())
        if (v && !(v->producer() && in_candidate(v->producer())) && !scalar_constant(v)) inputs.insert(v);
      for (const ir::Value* o : m->outputs()) {
        bool out = g_.is_output(o);
        for (const ir::Use& u : o->uses()) out = out || !in_candidate(u.node);
        outputs += out;
      }
    }
    // 4. A Transpose is a way of reading a subgraph input: its input comes from outside, and
    // every member reading that input reads it through the same perm.
    for (const ir::Node* m : members) {
      if (m->op_type() != "Transpose") continue;
      const ir::Value* in = m->input(0);
      if (in->producer() && in_candidate(in->producer()))
        return cat(m->name(), " would transpose a value computed inside the subgraph (only its inputs can be read transposed)");
      const size_t rank = in->type.shape.rank();
      for (const ir::Use& u : in->uses())
        if (in_candidate(u.node) && (u.node->op_type() != "Transpose" ||
                                     ir::transpose_perm(*u.node, rank) != ir::transpose_perm(*m, rank)))
          return cat(u.node->name(), " would read '", in->name(), "' other than through ", m->name(), "'s perm");
    }
    // A reduction may need Buffers between its loops: they share one data pointer.
    size_t buffers = 0;
    for (const ir::Node* m : members) buffers = is_reduction_op(m->op_type()) ? 1 : buffers;
    if (inputs.size() + outputs + buffers > max_ptrs_)
      return cat("the kernel would need ", inputs.size(), " inputs + ", outputs, " outputs", buffers ? " + 1 scratch (buffers)" : "",
                 " = ", inputs.size() + outputs + buffers, " data pointers, more than the ", max_ptrs_, " registers for them");
    if (buffers) return reduction_problem(members, inputs);
    return "";
  }

  // Empty when the generator can run the candidate's reductions: every member computes the
  // reduced tensor's shape (no broadcast past it), all reduce over the same trailing dims,
  // and every input spans all or none of them.
  static std::string reduction_problem(const std::vector<const ir::Node*>& members,
                                       const std::unordered_set<const ir::Value*>& inputs) {
    const ir::Node* first = nullptr;
    for (const ir::Node* m : members)
      if (is_reduction_op(m->op_type()) && !first) first = m;
    const ir::PartialShape& ps = first->input(0)->type.shape;
    if (!ps.is_static()) return cat(first->name(), " reduces a tensor of dynamic shape");
    KernelShapes ks;
    ks.output = ps.to_shape();
    for (const ir::Node* m : members)
      for (const ir::Value* o : m->outputs())
        if (!(o->type.shape.is_static() && o->type.shape.to_shape() == ks.output))
          return cat(m->name(), " makes a tensor of shape ", o->type.shape.to_string(), ", not the reduced ",
                     shape_to_string(ks.output), " (a kernel with a reduction keeps one shape)");
    for (const ir::Value* v : inputs) {
      if (!v->type.shape.is_static()) return cat("input '", v->name(), "' has a dynamic shape");
      ks.inputs.push_back(v->type.shape.to_shape());
    }
    try {
      make_schedule(ks, reduced_from(members, ks.output));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  // Empty when every value crossing the cluster's boundary is f32 (a bool or integer made
  // inside must be used inside only, e.g. a comparison whose Where did not join).
  std::string boundary_problem(const std::vector<ir::Node*>& members) const {
    const std::unordered_set<const ir::Node*> in(members.begin(), members.end());
    for (const ir::Node* m : members) {
      for (const ir::Value* v : m->inputs())
        if (v && !f32(v) && !scalar_constant(v) && !(v->producer() && in.count(v->producer())))
          return cat("the subgraph would read the non-f32 value '", v->name(), "' from outside");
      for (const ir::Value* o : m->outputs()) {
        bool out = g_.is_output(o);
        for (const ir::Use& u : o->uses()) out = out || !in.count(u.node);
        if (out && !f32(o)) return cat("the subgraph would export the non-f32 value '", o->name(), "'");
      }
    }
    return "";
  }

  // Replaces `members` (topologically sorted) by one Subgraph node.
  void materialize(const std::vector<ir::Node*>& members) {
    const std::unordered_set<const ir::Node*> in(members.begin(), members.end());
    std::vector<ir::Value*> ext, scalars, outs;
    std::unordered_set<const ir::Value*> seen;
    for (ir::Node* m : members)
      for (ir::Value* v : m->inputs()) {
        if (!v || (v->producer() && in.count(v->producer())) || !seen.insert(v).second) continue;
        (scalar_constant(v) ? scalars : ext).push_back(v);
      }
    for (ir::Node* m : members)
      for (ir::Value* o : m->outputs()) {
        bool out = g_.is_output(o);
        for (const ir::Use& u : o->uses()) out = out || !in.count(u.node);
        if (out) outs.push_back(o);
      }

    std::string name = members[0]->name() + "/subgraph";
    if (g_.find_node(name)) name = g_.unique_name(name);
    auto body = std::make_shared<ir::Graph>();
    body->name = name;
    body->opset_imports = g_.opset_imports;
    std::unordered_map<const ir::Value*, ir::Value*> map;
    for (ir::Value* v : ext) map[v] = body->add_input(v->name(), v->type);
    for (ir::Value* v : scalars) map[v] = body->add_constant(v->name(), v->constant());
    std::vector<std::string> fused;
    for (ir::Node* m : members) {
      std::vector<ir::Value*> ins;
      for (ir::Value* v : m->inputs()) ins.push_back(v ? map.at(v) : nullptr);
      std::vector<std::string> names;
      for (ir::Value* o : m->outputs()) names.push_back(o->name());
      ir::Node* b = body->add_node(m->op_type(), ins, names, m->name(), m->domain());
      b->set_opset(m->opset());
      b->attrs = m->attrs;
      for (size_t i = 0; i < m->num_outputs(); ++i) {
        b->output(i)->type = m->output(i)->type;
        map[m->output(i)] = b->output(i);
      }
      fused.push_back(m->name());
    }
    for (ir::Value* o : outs) body->add_output(map.at(o));

    if (!g_.opset_imports.count(kSubgraphDomain)) g_.opset_imports[kSubgraphDomain] = 1;
    std::vector<ir::ValueType> types;
    std::vector<std::string> out_names;
    for (ir::Value* o : outs) {
      types.push_back(o->type);
      out_names.push_back(o->name());
    }
    auto make = [&](const std::vector<std::string>& names, const std::string& node_name) {
      ir::Node* s = g_.add_node(kSubgraphOp, ext, names, node_name, kSubgraphDomain);
      s->attrs[kBodyAttr] = ir::Attribute(std::shared_ptr<ir::Graph>(body));
      s->attrs[kFusedAttr] = ir::Attribute(fused);
      for (size_t i = 0; i < types.size(); ++i) s->output(i)->type = types[i];
      return s;
    };
    // The replaced values hold their names until their producers are gone: go through a
    // node with generated names, then make the final one under the original names.
    ir::Node* tmp = make(std::vector<std::string>(outs.size()), "");
    for (size_t i = 0; i < outs.size(); ++i) g_.replace_all_uses(outs[i], tmp->output(i));
    for (auto it = members.rbegin(); it != members.rend(); ++it) g_.erase_node(*it);
    ir::Node* fin = make(out_names, name);
    for (size_t i = 0; i < outs.size(); ++i) g_.replace_all_uses(tmp->output(i), fin->output(i));
    g_.erase_node(tmp);
    if (log_)
      log_->applied(kTokenizationPass, join(fused, " -> "),
                    cat("Subgraph '", name, "': ", members.size(), " ops, ", ext.size(), " inputs, ", outs.size(),
                        " outputs"));
  }

  ir::Graph& g_;
  const SkippedNodes& skipped_;
  transforms::PassLog* log_;
  size_t max_ptrs_;
  std::vector<ir::Node*> order_;
  std::unordered_map<const ir::Node*, size_t> pos_;
  std::unordered_map<const ir::Node*, int> cluster_of_;
  std::vector<std::vector<ir::Node*>> clusters_;
};

}  // namespace

namespace {

bool tokenizable_op(const ir::Node& n) {
  if (n.num_outputs() != 1) return false;
  // only what the generator can emit: a body it cannot compile would run on the reference
  // kernels, slower than the ops on their own oneDNN nodes
  if (!is_supported(n)) return false;
  if (n.domain() == "com.microsoft") return n.num_inputs() == 1 && f32(n.input(0));
  if (!n.is_onnx_domain() || !ir::OpRegistry::instance().find(n.domain(), n.op_type())) return false;
  if (n.op_type() == "Clip")
    for (size_t i = 1; i < n.num_inputs(); ++i)
      if (n.has_input(i) && !(scalar_constant(n.input(i)) && n.input(i)->constant().dtype() == DType::f32)) return false;
  return true;
}

}  // namespace

// Bools and integers live inside a kernel only: a node reading or making one is tokenizable
// when that value comes from (goes to) tokenizable nodes; the kernel's boundary is f32.
bool tokenizable(const ir::Node& n) {
  if (!tokenizable_op(n)) return false;
  for (const ir::Value* v : n.inputs()) {
    if (!v || f32(v) || scalar_constant(v)) continue;
    if (!v->producer() || !tokenizable_op(*v->producer())) return false;
  }
  const ir::Value* out = n.output(0);
  if (!f32(out)) {
    if (out->uses().empty()) return false;
    for (const ir::Use& u : out->uses())
      if (!tokenizable_op(*u.node)) return false;
  }
  return true;
}

size_t tokenize(ir::Graph& g, const SkippedNodes& skipped, size_t max_data_pointers, transforms::PassLog* log) {
  return Tokenizer(g, skipped, log, max_data_pointers).run();
}

}  // namespace kiln::snippets
