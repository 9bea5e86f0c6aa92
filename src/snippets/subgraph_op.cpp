#include "snippets/subgraph_op.hpp"

#include <limits>
#include <memory>
#include <optional>
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

// The output types of `body` for static inputs of types `given`, read off the body's own
// declared types when they say it: every declared input dim a number equal to the given one or
// a symbol (each symbol one value wherever it appears), every declared output dim a number or
// one of those symbols. A template's bodies are typed on the template's symbols (the tokenizer
// runs on it), so a new input shape's Subgraphs take their output shapes from them instead of
// an inference over a copy of each body (6% of an EfficientNet-B0 plan's instructions). A body
// made for other static shapes, an output dim inference could not compute (a symbol of its
// own) or inputs that break a symbol's equality (a broadcast the template did not see) leave
// it to that inference: nullopt.
std::optional<std::vector<ir::ValueType>> declared_outputs(const ir::Graph& body, const ir::InferContext& ctx) {
  struct Binding {
    const std::string* symbol;
    int64_t value;
  };
  std::vector<Binding> bound;
  auto value_of = [&](const std::string& symbol) -> int64_t {
    for (const Binding& b : bound)
      if (*b.symbol == symbol) return b.value;
    return -1;
  };
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    const ir::ValueType& declared = body.inputs()[i]->type;
    const ir::ValueType& given = ctx.input_type(i);
    if (declared.kind != ValueKind::tensor || given.kind != ValueKind::tensor || declared.dtype != given.dtype ||
        !declared.shape.rank_known || !given.shape.rank_known || declared.shape.dims.size() != given.shape.dims.size())
      return std::nullopt;
    for (size_t d = 0; d < declared.shape.dims.size(); ++d) {
      const ir::Dim& want = declared.shape.dims[d];
      const ir::Dim& have = given.shape.dims[d];
      if (!have.is_static()) return std::nullopt;  // symbolic inputs (the template's own inference)
      if (want.is_static()) {
        if (want.value != have.value) return std::nullopt;
      } else if (want.is_symbolic()) {
        const int64_t v = value_of(want.symbol);
        if (v < 0) bound.push_back({&want.symbol, have.value});
        else if (v != have.value) return std::nullopt;
      } else {
        return std::nullopt;
      }
    }
  }
  std::vector<ir::ValueType> out;
  out.reserve(body.outputs().size());
  for (const ir::Value* o : body.outputs()) {
    const ir::ValueType& declared = o->type;
    if (declared.kind != ValueKind::tensor || declared.dtype == DType::undefined || !declared.shape.rank_known)
      return std::nullopt;
    ir::ValueType t;
    t.dtype = declared.dtype;
    t.shape = ir::PartialShape(std::vector<ir::Dim>(declared.shape.dims.size()));
    for (size_t d = 0; d < declared.shape.dims.size(); ++d) {
      const ir::Dim& dim = declared.shape.dims[d];
      const int64_t v = dim.is_static() ? dim.value : dim.is_symbolic() ? value_of(dim.symbol) : -1;
      if (v < 0) return std::nullopt;
      t.shape.dims[d] = ir::Dim(v);
    }
    out.push_back(std::move(t));
  }
  return out;
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
    const std::shared_ptr<ir::Graph> shared = ctx.node().attr_graph(kBodyAttr);
    if (std::optional<std::vector<ir::ValueType>> known = declared_outputs(*shared, ctx)) {
      for (size_t i = 0; i < known->size(); ++i) ctx.set_output(i, (*known)[i].dtype, std::move((*known)[i].shape));
      return;
    }
    // The body is shared (clones of the outer graph share it): infer a copy.
    const std::shared_ptr<ir::Graph> body = inference_copy(shared);
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
