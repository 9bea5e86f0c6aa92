#include <algorithm>

#include "snippets/lowered/pass/passes.hpp"

namespace kiln::snippets::lowered::pass {

namespace {

size_t inner_loop(const Expression& e) { return e.loop_ids.size() >= 2 ? e.loop_ids[1] : 0; }

}  // namespace

// Places every Buffer in the kernel's scratch memory (one row each, rounded up to 64 bytes)
// and gives it a data pointer ("ptr"; its Loads and Stores get it too). Non-optimized: one
// region and one pointer per Buffer. Optimized: a Buffer reuses the region (and pointer) of
// one whose last read is in the inner loop that writes it or earlier. In that same loop the
// read happens first at each position: a loop body's Loads precede its Stores (which sit at
// its end), also in unrolled and tail copies, and both walk the row in the same steps, so
// writing in place over the value just read is safe (softmax's input row becomes its exp row).
size_t allocate_buffers(LinearIR& lir, bool optimized) {
  std::vector<Expression*> buffers;
  for (auto& e : lir.expressions())
    if (e->type() == "Buffer") buffers.push_back(e.get());
  const int64_t row = buffers.empty() ? 0 : (lir.master_shape().at(1) + 15) / 16 * 16;
  std::vector<size_t> region_free_from;  // per region: the last inner loop reading it
  for (Expression* b : buffers) {
    const size_t written = inner_loop(*b->input_expr(0));
    size_t last_read = written;
    for (const auto& c : b->get_output_port_connector(0)->get_consumers()) last_read = std::max(last_read, inner_loop(*c.get_expr()));
    size_t region = region_free_from.size();
    if (optimized)
      for (size_t r = 0; r < region_free_from.size() && region == region_free_from.size(); ++r)
        if (region_free_from[r] <= written) region = r;
    if (region == region_free_from.size()) region_free_from.push_back(0);
    region_free_from[region] = last_read;
    b->op().attrs["ptr"] = static_cast<double>(region);
    b->op().attrs["offset"] = static_cast<double>(static_cast<int64_t>(region) * row);
    auto mark = [&](Expression* mem) {
      if (mem->type() == "Load" || mem->type() == "Store") mem->op().attrs["ptr"] = static_cast<double>(region);
    };
    mark(b->input_expr(0));
    for (const auto& c : b->get_output_port_connector(0)->get_consumers()) mark(c.get_expr());
  }
  std::vector<int64_t> offsets;
  for (size_t r = 0; r < region_free_from.size(); ++r) offsets.push_back(static_cast<int64_t>(r) * row);
  lir.set_buffers(offsets, static_cast<int64_t>(region_free_from.size()) * row);
  return region_free_from.size();
}

}  // namespace kiln::snippets::lowered::pass
