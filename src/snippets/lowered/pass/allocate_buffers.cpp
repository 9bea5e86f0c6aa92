#include <algorithm>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

size_t inner_loop_or_zero(const Expression& e) { return e.loop_ids.size() >= 2 ? e.loop_ids[1] : 0; }

}  // namespace

// Places every Buffer in the kernel's scratch memory (one row each, rounded up to 64 bytes):
// its "offset" there, also on its Loads and Stores ("buffer_offset", elements). Every Buffer
// row is walked in the same steps, so they all share one data pointer (the scratch's, "ptr" 0):
// however many values cross loops, a kernel spends one register on them. Non-optimized: one
// region per Buffer. Optimized: a Buffer reuses the region of one whose last read is in the
// inner loop that writes it or earlier. In that same loop the
// read happens first at each position: a loop body's Loads precede its Stores (which sit at
// its end), also in unrolled and tail copies, and both walk the row in the same steps, so
// writing in place over the value just read is safe (softmax's input row becomes its exp row).
size_t allocate_buffers(LinearIR& lir, bool optimized) {
  std::vector<Expression*> buffers;
  for (auto& e : lir.expressions())
    if (e->kind() == OpKind::Buffer) buffers.push_back(e.get());
  const int64_t row = buffers.empty() ? 0 : (lir.master_shape().at(1) + 15) / 16 * 16;
  std::vector<size_t> region_free_from;  // per region: the last inner loop reading it
  for (Expression* b : buffers) {
    const size_t written = inner_loop_or_zero(*b->input_expr(0));
    size_t last_read = written;
    for (const auto& c : b->get_output_port_connector(0)->get_consumers()) last_read = std::max(last_read, inner_loop_or_zero(*c.get_expr()));
    size_t region = region_free_from.size();
    if (optimized)
      for (size_t r = 0; r < region_free_from.size() && region == region_free_from.size(); ++r)
        if (region_free_from[r] <= written) region = r;
    if (region == region_free_from.size()) region_free_from.push_back(0);
    region_free_from[region] = last_read;
    const double offset = static_cast<double>(static_cast<int64_t>(region) * row);
    b->op().attrs["ptr"] = 0;
    b->op().attrs["offset"] = offset;
    auto mark = [&](Expression* mem) {
      if (mem->kind() != OpKind::Load && mem->kind() != OpKind::Store) return;
      mem->op().attrs["ptr"] = 0;
      mem->op().attrs["buffer_offset"] = offset;
    };
    mark(b->input_expr(0));
    for (const auto& c : b->get_output_port_connector(0)->get_consumers()) mark(c.get_expr());
  }
  const int64_t scratch = static_cast<int64_t>(region_free_from.size()) * row;
  lir.set_buffers(buffers.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{0}, scratch);
  return region_free_from.size();
}

}  // namespace kiln::snippets::lowered::pass
