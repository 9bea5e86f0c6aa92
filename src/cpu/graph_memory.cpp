// Compile stage 8 (cpu/compile_pipeline.hpp): where every buffer lives. Views alias their
// input; Concat inputs are placed inside their output when each is one contiguous slice;
// Eltwise / Binary / a convolution's sum write over an input nobody reads later; the rest,
// and the nodes' working memory, get arena offsets by lifetime (memory_planner.cpp).
// bind_arena / bind_views point the edges at their bytes (again whenever the arena moves).
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/graph.hpp"
#include "cpu/memory_planner.hpp"

namespace kiln::cpu {

static Edge* root_of(Edge* e) {
  while (e->alias_of) e = e->alias_of;
  return e;
}

static size_t offset_in_root(const Edge* e) {
  size_t off = 0;
  for (; e->alias_of; e = e->alias_of) off += e->alias_offset;
  return off;
}

// Same bytes at the same places: equal descriptors, except that the stride of a dim of
// size 1 does not matter (a slice [1,64,28,28] of [1,256,28,28] has another N stride).
static bool same_layout(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
  const auto &x = a.data, &y = b.data;
  if (x.ndims != y.ndims || x.data_type != y.data_type || x.format_kind != dnnl_blocked ||
      y.format_kind != dnnl_blocked || x.offset0 != y.offset0)
    return false;
  const auto &bx = x.format_desc.blocking, &by = y.format_desc.blocking;
  if (bx.inner_nblks != by.inner_nblks) return false;
  for (int i = 0; i < bx.inner_nblks; ++i)
    if (bx.inner_blks[i] != by.inner_blks[i] || bx.inner_idxs[i] != by.inner_idxs[i]) return false;
  for (int i = 0; i < x.ndims; ++i) {
    if (x.dims[i] != y.dims[i] || x.padded_dims[i] != y.padded_dims[i] || x.padded_offsets[i] != y.padded_offsets[i])
      return false;
    if (x.padded_dims[i] != 1 && bx.strides[i] != by.strides[i]) return false;
  }
  return true;
}

// The same but for the stride of dim 0 (the images): a slice of a Concat's output along the
// channels, for a batch of more than one image, as against the tensor alone.
static bool same_but_images_apart(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
  if (a.data.ndims < 2) return false;
  dnnl::memory::desc c = b;
  c.data.format_desc.blocking.strides[0] = a.data.format_desc.blocking.strides[0];
  return a.data.format_kind == dnnl_blocked && b.data.format_kind == dnnl_blocked && same_layout(a, c);
}

void Graph::plan_concat_in_place() {
  std::unordered_map<const Edge*, int> graph_output;
  for (Edge* e : output_edges_) graph_output[e] = 1;
  // an edge's producer: made when a Concat's input first needs it (a plan is made per new input
  // shape; most have no Concat whose images lie apart)
  std::unordered_map<const Edge*, const Node*> producer;
  auto index = [&] {
    if (!producer.empty()) return;
    for (auto& n : nodes_)
      for (Edge* e : n->outputs) producer[e] = n.get();
  };
  for (auto& node : nodes_) {
    const int axis = node->concat_axis();
    if (axis < 0) continue;
    Edge* out = node->outputs[0];
    if (out->kind != Edge::Kind::arena || out->alias_of) continue;
    // every input must be a buffer of its own whose bytes are exactly one contiguous
    // slice of the output in the output's layout (e.g. N = 1 and whole channel blocks)
    std::vector<size_t> offsets;
    std::vector<std::optional<dnnl::memory::desc>> apart;  // an input given images further apart
    std::unordered_map<const Edge*, int> seen;
    int64_t at = 0;
    bool ok = true;
    const dnnl::memory::desc od = out->desc();
    for (Edge* in : node->inputs) {
      if (!in || in->kind != Edge::Kind::arena || in->alias_of || seen[in]++ || graph_output.count(in)) {
        ok = false;
        break;
      }
      dnnl::memory::dims dims = to_dims(in->shape), offs(dims.size(), 0);
      offs[static_cast<size_t>(axis)] = at;
      at += in->shape[static_cast<size_t>(axis)];
      try {
        dnnl::memory::desc sub = od.submemory_desc(dims, offs);
        const size_t byte_off = static_cast<size_t>(sub.data.offset0) * dtype_size(out->dtype);
        sub.data.offset0 = 0;
        apart.emplace_back();
        if (!same_layout(sub, in->desc())) {
          // images further apart than the input's own: where its producer writes each image where
          // the layout says (kiln's kernels), and nothing else reads it (a batch of more than one
          // image: GoogLeNet's and SqueezeNet's Concats of channel blocks, a copy each otherwise)
          const bool apart_layout = same_but_images_apart(sub, in->desc());
          if (apart_layout) index();
          const auto p = producer.find(in);
          if (!apart_layout || readers_of(in).size() != 1 || p == producer.end() ||
              p->second->outputs.empty() || p->second->outputs[0] != in || !p->second->writes_images_apart())
            ok = false;
          apart.back() = sub;
        }
        // the bytes it spans: its images, the last one's own size past the stride of the others
        // (oneDNN's get_size() counts a whole stride for the last one as well)
        const size_t images = in->shape.empty() ? 1 : static_cast<size_t>(std::max<int64_t>(in->shape[0], 1));
        const size_t span = apart.back() ? (images - 1) * static_cast<size_t>(apart.back()->data.format_desc.blocking.strides[0]) *
                                                   dtype_size(in->dtype) +
                                               in->bytes() / images
                                         : in->bytes();
        if (byte_off + span > out->bytes()) ok = false;
        offsets.push_back(byte_off);
      } catch (const dnnl::error&) {
        ok = false;
      }
      if (!ok) break;
    }
    if (!ok) continue;
    for (size_t i = 0; i < node->inputs.size(); ++i) {
      node->inputs[i]->alias_of = out;
      node->inputs[i]->alias_offset = offsets[i];
      if (apart[i]) node->inputs[i]->blocked = *apart[i];  // its producer writes the images that far apart
    }
    node->set_inputs_in_output();
    ++concat_in_place_nodes_;
  }
}

void Graph::plan_memory() {
  // views share their input's bytes: their root buffer lives as long as any view is read
  for (auto& n : nodes_)
    for (size_t i = 0; i < n->outputs.size(); ++i)
      if (const auto v = n->output_view(i)) {
        Edge* in = n->inputs[static_cast<size_t>(v->input)];
        n->outputs[i]->alias_of = root_of(in);
        n->outputs[i]->alias_offset = offset_in_root(in) + v->offset;
      }
  plan_concat_in_place();
  plan_in_place();
  std::unordered_map<Edge*, size_t> index;
  std::vector<BufferRequest> reqs;
  std::vector<Edge*> planned;
  const int end = static_cast<int>(nodes_.size());
  for (int step = 0; step < end; ++step) {
    for (Edge* e : nodes_[static_cast<size_t>(step)]->outputs) {
      // a buffer lives from the first write into it: its own producer, or the producer
      // of a Concat input placed inside it (earlier)
      Edge* r = root_of(e);
      if (r->kind != Edge::Kind::arena || index.count(r)) continue;
      index[r] = reqs.size();
      reqs.push_back({r->bytes(), step, step});
      planned.push_back(r);
    }
    for (Edge* e : nodes_[static_cast<size_t>(step)]->inputs)
      if (e && index.count(root_of(e))) reqs[index[root_of(e)]].last = step;
  }
  for (Edge* e : output_edges_)
    if (index.count(root_of(e))) reqs[index[root_of(e)]].last = end;  // kept until copied out
  // the nodes' working memory, alive during their own step
  const size_t buffers = reqs.size();
  scratch_nodes_.clear();
  for (int step = 0; step < end; ++step)
    if (const size_t b = nodes_[static_cast<size_t>(step)]->scratch_bytes(); b > 0) {
      reqs.push_back({b, step, step});
      scratch_nodes_.push_back(nodes_[static_cast<size_t>(step)].get());
    }
  MemoryPlan plan = kiln::cpu::plan_memory(reqs);
  arena_bytes_ = plan.total_bytes;
  planned_ = std::move(planned);
  scratch_offsets_.assign(plan.offsets.begin() + static_cast<std::ptrdiff_t>(buffers), plan.offsets.end());
  plan.offsets.resize(buffers);
  planned_offsets_ = std::move(plan.offsets);
  // Outputs whose producer can write straight into the tensor run() returns: arena buffers
  // of their own (not a view or an in-place alias of another buffer), plain, listed once.
  // Views of them (a Concat's inputs placed inside it) follow through bind_views().
  output_direct_.assign(output_edges_.size(), false);
  for (size_t i = 0; i < output_edges_.size(); ++i) {
    Edge* e = output_edges_[i];
    const bool once = std::count(output_edges_.begin(), output_edges_.end(), e) == 1;
    output_direct_[i] = e->kind == Edge::Kind::arena && !e->alias_of && e->is_plain() && e->bytes() > 0 && once;
  }
  KILN_CHECK(arena_bytes_ <= max_arena_bytes_,
             cat("graph '", ir_->name, "': its intermediate tensors need ", arena_bytes_, " bytes at once, more than "
                 "kiln_max_tensor_bytes = ", max_arena_bytes_, " (the machine's memory unless set)"));
  if (!arena_) arena_ = std::make_shared<Arena>();
  bind_arena(arena_->reserve(arena_bytes_));
  for (Edge* e : edges_) e->bind_memory();
}

void Graph::bind_arena(void* base) {
  arena_base_ = base;
  for (size_t i = 0; i < planned_.size(); ++i) planned_[i]->data = static_cast<char*>(base) + planned_offsets_[i];
  for (size_t i = 0; i < scratch_nodes_.size(); ++i) scratch_nodes_[i]->scratch = static_cast<char*>(base) + scratch_offsets_[i];
  bind_views();
}

void Graph::plan_in_place() {
  // last step reading each root buffer (through any of its views); graph outputs are read at the end
  const int end = static_cast<int>(nodes_.size());
  std::unordered_map<Edge*, int> last;
  for (int step = 0; step < end; ++step)
    for (Edge* e : nodes_[static_cast<size_t>(step)]->inputs)
      if (e) last[root_of(e)] = step;
  for (Edge* e : output_edges_) last[root_of(e)] = end;
  for (int step = 0; step < end; ++step) {
    Node& n = *nodes_[static_cast<size_t>(step)];
    const int k = n.inplace_input();
    if (k < 0 || n.outputs.empty()) continue;
    Edge* in = n.inputs[static_cast<size_t>(k)];
    Edge* out = n.outputs[0];
    if (!in || out->kind != Edge::Kind::arena || out->alias_of) continue;
    Edge* r = root_of(in);
    if (r->kind != Edge::Kind::arena || last[r] != step) continue;  // read later, or not ours to overwrite
    bool read_twice = false;  // x + x: the other operand is the same buffer
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (static_cast<int>(i) != k && n.inputs[i] && root_of(n.inputs[i]) == r) read_twice = true;
    if (read_twice || in->bytes() != out->bytes() || in->dtype != out->dtype || !(in->desc() == out->desc())) continue;
    out->alias_of = r;
    out->alias_offset = offset_in_root(in);  // over the input's own bytes (a slice view starts inside its root)
    last[r] = last.count(out) ? last[out] : step;
    ++in_place_nodes_;
  }
}

void Graph::bind_views() {
  for (Edge* e : edges_) {
    if (!e->alias_of) continue;
    char* root = static_cast<char*>(root_of(e)->data);  // null before an arena is bound
    e->data = root ? root + offset_in_root(e) : nullptr;
  }
  for (Edge* e : edges_) e->rebind_data();
}

}  // namespace kiln::cpu
