#include <kiln/error.hpp>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

void add_port(LinearIR& lir, const std::vector<size_t>& loop_ids, Expression* e, bool entry) {
  for (size_t l : loop_ids) {
    LoopPort p;
    p.expr = e;
    (entry ? lir.loops()[l].entry_points : lir.loops()[l].exit_points).push_back(p);
  }
}

bool in_inner_loop(const Expression& e) { return e.loop_ids.size() >= 2; }

// Past the last expression of inner loop `loop` (where its Stores go).
LinearIR::iterator end_of_loop(LinearIR& lir, size_t loop) {
  auto pos = lir.end();
  for (auto it = lir.begin(); it != lir.end(); ++it)
    if (in_inner_loop(**it) && (*it)->loop_ids[1] == loop) pos = it;
  if (pos != lir.end()) return std::next(pos);
  // nothing computed (outputs that are inputs): before the Results
  for (auto it = lir.begin(); it != lir.end(); ++it)
    if ((*it)->kind() == OpKind::Result) return it;
  return lir.end();
}

}  // namespace

// Memory is touched only by explicit Load / Store expressions: each consumer of a Parameter
// or a Buffer gets its own Load right before it, in its own loops (CleanRepeatedDataPointerShifts
// later keeps one pointer shift per data pointer); each Result and each Buffer gets a Store at
// the end of the inner loop that computes its value.
void insert_load_store(LinearIR& lir) {
  std::vector<ExpressionPtr> sources, results, buffers;
  size_t last_loop = 0;
  for (auto& e : lir.expressions()) {
    if (e->kind() == OpKind::Parameter || e->kind() == OpKind::Buffer) sources.push_back(e);
    if (e->kind() == OpKind::Result) results.push_back(e);
    if (e->kind() == OpKind::Buffer) buffers.push_back(e);
    if (in_inner_loop(*e)) last_loop = std::max(last_loop, e->loop_ids[1]);
  }
  KILN_CHECK(lir.loops().size() >= 2, "InsertLoadStore: no loops (run MarkLoops first)");
  if (last_loop == 0) last_loop = 1;
  auto access = [](const Expression& src) -> std::pair<std::string, double> {
    if (src.kind() == OpKind::Buffer) return {"buffer", src.op().attr("buffer")};
    return {"param", src.op().attr("index")};
  };
  auto make_load = [&](const ExpressionPtr& src, LinearIR::iterator pos, const std::vector<size_t>& loops) {
    auto [key, id] = access(*src);
    auto load = lir.insert_node(pos, Op{"Load", {{key, id}}}, {src->get_output_port(0)}, 1, loops);
    load->get_input_port_descriptor(0).subtensor = {1, lir.vector_length()};
    load->get_output_port_descriptor(0).subtensor = {1, lir.vector_length()};
    add_port(lir, loops, load.get(), true);
    return load;
  };
  for (const auto& src : sources) {
    auto consumers = src->get_output_port_connector(0)->get_consumers();
    for (const auto& c : consumers) {
      Expression* ce = c.get_expr();
      if (ce->loop_ids.empty()) continue;  // a Result reading an input directly: below
      auto load = make_load(src, lir.find(ce), ce->loop_ids);
      LinearIR::connect(load->get_output_port(0), c);
    }
  }
  auto make_store = [&](ExpressionPort value, const Expression& dst, const std::vector<int64_t>& shape) {
    Expression* producer = value.get_expr();
    const size_t loop = in_inner_loop(*producer) ? producer->loop_ids[1] : last_loop;
    const std::vector<size_t> nest = {0, loop};
    auto pos = end_of_loop(lir, loop);
    if (producer->kind() == OpKind::Parameter) value = make_load(*lir.find(producer), pos, nest)->get_output_port(0);  // an output that is an input
    Op op = dst.kind() == OpKind::Buffer ? Op{"Store", {{"buffer", dst.op().attr("buffer")}}} : Op{"Store", {{"result", dst.op().attr("index")}}};
    if (dst.kind() == OpKind::Result && lir.bf16_outputs()) op.attrs["bf16"] = 1;  // 2-byte elements
    auto store = lir.insert_node(pos, op, {value}, 1, nest);
    store->get_input_port_descriptor(0).subtensor = {1, lir.vector_length()};
    store->get_output_port_descriptor(0).subtensor = {1, lir.vector_length()};
    store->get_output_port_descriptor(0).shape = shape;
    add_port(lir, nest, store.get(), false);
    return store;
  };
  for (const auto& buf : buffers) {
    auto store = make_store(buf->get_input_port_connector(0)->get_source(), *buf, buf->get_output_port_descriptor(0).shape);
    LinearIR::connect(store->get_output_port(0), buf->get_input_port(0));
  }
  for (const auto& res : results) {
    auto store = make_store(res->get_input_port_connector(0)->get_source(), *res, res->get_input_port_descriptor(0).shape);
    LinearIR::connect(store->get_output_port(0), res->get_input_port(0));
  }
}

}  // namespace kiln::snippets::lowered::pass
