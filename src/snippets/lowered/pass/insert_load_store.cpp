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

}  // namespace

// Memory is touched only by explicit Load / Store expressions: each consumer of a Parameter
// inside a loop gets its own Load (CleanRepeatedDataPointerShifts later keeps one pointer
// shift per Parameter), each Result gets a Store at the end of the loop body.
void insert_load_store(LinearIR& lir) {
  std::vector<ExpressionPtr> params, results;
  for (auto& e : lir.expressions()) {
    if (e->type() == "Parameter") params.push_back(e);
    if (e->type() == "Result") results.push_back(e);
  }
  auto make_load = [&](const ExpressionPtr& param, LinearIR::iterator pos, const std::vector<size_t>& loops) {
    Op op{"Load", {{"param", param->op().attr("index")}}};
    auto load = lir.insert_node(pos, op, {param->get_output_port(0)}, 1, loops);
    load->get_input_port_descriptor(0).subtensor = {1, lir.vector_length()};
    load->get_output_port_descriptor(0).subtensor = {1, lir.vector_length()};
    add_port(lir, loops, load.get(), true);
    return load;
  };
  for (const auto& param : params) {
    auto consumers = param->get_output_port_connector(0)->get_consumers();
    for (const auto& c : consumers) {
      Expression* ce = c.get_expr();
      if (ce->loop_ids.empty()) continue;  // a Result reading the input directly: below
      auto load = make_load(param, lir.find(ce), ce->loop_ids);
      LinearIR::connect(load->get_output_port(0), c);
    }
  }
  // Stores go after the last loop expression, in Result order.
  auto last_in_loop = lir.end();
  for (auto it = lir.begin(); it != lir.end(); ++it)
    if (!(*it)->loop_ids.empty()) last_in_loop = it;
  KILN_CHECK(last_in_loop != lir.end() || lir.loops().size() >= 2, "InsertLoadStore: no loops (run MarkLoops first)");
  std::vector<size_t> nest = {0, 1};
  auto pos = last_in_loop == lir.end() ? lir.find(results.front().get()) : std::next(last_in_loop);
  for (const auto& res : results) {
    ExpressionPort src = res->get_input_port_connector(0)->get_source();
    if (src.get_expr()->type() == "Parameter") {
      // An output that is an input: copy it through a Load.
      auto self = lir.find(src.get_expr());
      ExpressionPtr param = *self;
      auto load = make_load(param, pos, nest);
      src = load->get_output_port(0);
    }
    Op op{"Store", {{"result", res->op().attr("index")}}};
    auto store = lir.insert_node(pos, op, {src}, 1, nest);
    store->get_input_port_descriptor(0).subtensor = {1, lir.vector_length()};
    store->get_output_port_descriptor(0).subtensor = {1, lir.vector_length()};
    store->get_output_port_descriptor(0).shape = res->get_input_port_descriptor(0).shape;
    LinearIR::connect(store->get_output_port(0), res->get_input_port(0));
    add_port(lir, nest, store.get(), false);
  }
}

}  // namespace kiln::snippets::lowered::pass
