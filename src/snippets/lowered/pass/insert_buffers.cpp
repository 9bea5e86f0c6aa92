#include <kiln/error.hpp>

#include "core/strings.hpp"
#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

size_t inner_loop_or_none(const Expression& e) { return e.loop_ids.size() >= 2 ? e.loop_ids[1] : SIZE_MAX; }

}  // namespace

// A vector value computed in one inner loop and read in a later one (softmax's input when an
// op computes it: the max loop reads it, then the exp loop) cannot stay in a register across
// the whole row: it goes through a Buffer, one row of the kernel's scratch memory. The Buffer
// sits between the loops (rows loop only, after the producer's inner loop); InsertLoadStore
// then stores into it in the producer's loop and loads from it in each later loop.
size_t insert_buffers(LinearIR& lir) {
  const auto& master = lir.master_shape();
  KILN_CHECK(master.size() == 2, "InsertBuffers: the master shape must be 2-D [rows, inner]");
  std::vector<ExpressionPtr> producers;
  for (auto& e : lir.expressions())
    if (inner_loop_or_none(*e) != SIZE_MAX && e->num_outputs() == 1) producers.push_back(e);
  size_t made = 0;
  for (const ExpressionPtr& p : producers) {
    const size_t loop = inner_loop_or_none(*p);
    std::vector<ExpressionPort> later;
    for (const auto& c : p->get_output_port_connector(0)->get_consumers()) {
      const size_t cl = inner_loop_or_none(*c.get_expr());
      if (cl != SIZE_MAX && cl != loop) later.push_back(c);
    }
    if (later.empty()) continue;
    // after the producer's inner loop: past the last expression of that loop
    auto pos = lir.find(p.get());
    for (auto it = pos; it != lir.end(); ++it)
      if (inner_loop_or_none(**it) == loop) pos = it;
    Op op{"Buffer", {{"buffer", static_cast<double>(made)}}};
    auto buf = lir.insert_node(std::next(pos), op, {p->get_output_port(0)}, 1, {p->loop_ids.at(0)});
    buf->get_output_port_descriptor(0).shape = {1, master[1]};
    buf->get_output_port_descriptor(0).subtensor = {1, lir.vector_length()};
    for (const auto& c : later) LinearIR::connect(buf->get_output_port(0), c);
    ++made;
  }
  return made;
}

}  // namespace kiln::snippets::lowered::pass
