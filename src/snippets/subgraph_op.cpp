#include "snippets/subgraph_op.hpp"

#include <limits>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/address_memo.hpp"
#include "ir/op_registry.hpp"
#include "runtime/reference_executor.hpp"

namespace kiln::snippets {

namespace {

constexpr size_t kMany = std::numeric_limits<int32_t>::max();

void check_body(const ir::Node& n) {
  auto body = n.attr_graph(kBodyAttr);
  if (!body) throw Error(cat(n.describe(), ": attribute 'body' holds no graph"));
  if (body->inputs().size() != n.num_inputs())
    throw Error(cat(n.describe(), ": the body has ", body->inputs().size(), " inputs, the node ", n.num_inputs()));
  if (body->outputs().size() != n.num_outputs())
    throw Error(cat(n.describe(), ": the body has ", body->outputs().size(), " outputs, the node ", n.num_outputs()));
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (!n.has_input(i)) throw Error(cat(n.describe(), ": input ", i, " is missing (every body input needs one)"));
}

// The copy of `body` this thread infers shapes on, made once per body rather than for every
// new input shape (2.8% of a mobilenet_v3_small plan): the body itself is shared by a graph
// and its copies and never changes, and inference writes every type it reads after the
// inputs', so a copy's types from an earlier inference are all written over.
std::shared_ptr<ir::Graph> inference_copy(const std::shared_ptr<ir::Graph>& body) {
  thread_local AddressMemo<ir::Graph, std::shared_ptr<ir::Graph>> copies;
  if (const std::shared_ptr<ir::Graph>* copy = copies.find(body)) return *copy;
  std::shared_ptr<ir::Graph> copy = body->clone();
  copies.insert(body, copy);
  return copy;
}

}  // namespace

bool is_subgraph(const ir::Node& n) { return n.op_type() == kSubgraphOp && n.domain() == kSubgraphDomain; }

void register_subgraph_op(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = kSubgraphDomain;
  s.name = kSubgraphOp;
  s.min_inputs = 0;
  s.max_inputs = kMany;
  s.min_outputs = 1;
  s.max_outputs = kMany;
  s.attrs = {{kBodyAttr, ir::AttrType::graph, true}, {kFusedAttr, ir::AttrType::strings}};
  s.validate = check_body;
  s.infer = [](ir::InferContext& ctx) {
    // The body is shared (clones of the outer graph share it): infer a copy.
    const std::shared_ptr<ir::Graph> body = inference_copy(ctx.node().attr_graph(kBodyAttr));
    for (size_t i = 0; i < body->inputs().size(); ++i) body->inputs()[i]->type = ctx.input_type(i);
    for (ir::Value* o : body->outputs())
      if (o->producer()) o->type = ir::ValueType{};  // no stale declared types
    ir::infer_shapes(*body);
    for (size_t i = 0; i < body->outputs().size(); ++i) {
      const ir::ValueType& t = body->outputs()[i]->type;
      ctx.set_output(i, t.dtype, t.shape);
    }
  };
  s.run = [](ir::RunContext& ctx) {
    auto body = ctx.node().attr_graph(kBodyAttr);
    std::vector<Tensor> ins;
    ins.reserve(ctx.num_inputs());
    for (size_t i = 0; i < ctx.num_inputs(); ++i) ins.push_back(ctx.input(i));
    // The body's inputs carry the types seen when it was made; when the node's inputs
    // have since changed (e.g. another rank), run a copy with untyped inputs.
    bool fits = true;
    try {
      std::unordered_map<std::string, int64_t> symbols;
      for (size_t i = 0; i < ins.size(); ++i) runtime::check_input(*body->inputs()[i], ins[i], symbols);
    } catch (const Error&) {
      fits = false;
    }
    if (!fits) {
      body = body->clone();
      for (ir::Value* in : body->inputs()) in->type = ir::ValueType{};
    }
    runtime::ReferenceExecutor exec(body);
    auto outs = exec.run(ins);
    if (outs.size() != ctx.num_outputs())
      throw ctx.error("the body produced ", outs.size(), " outputs, expected ", ctx.num_outputs());
    for (size_t i = 0; i < outs.size(); ++i) ctx.set_output(i, std::move(outs[i]));
  };
  r.add(std::move(s));
}

// The Subgraph op is in the process's registry (ir/op_registry.hpp: providers); this
// file is linked wherever the tokenizer (which creates Subgraph nodes) is.
namespace {
[[maybe_unused]] const bool kRegistered = ir::OpRegistry::add_provider(&register_subgraph_op);
}  // namespace

}  // namespace kiln::snippets
