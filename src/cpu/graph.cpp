#include "cpu/graph.hpp"

#include "core/node_timer.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <unordered_map>

#include "core/strings.hpp"
#include "cpu/compile_pipeline.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/memory_planner.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

Edge* Graph::new_edge(const std::string& name, DType dtype, Shape shape) {
  auto e = std::make_unique<Edge>();
  e->name = name;
  e->dtype = dtype;
  e->shape = std::move(shape);
  edges_.push_back(std::move(e));
  return edges_.back().get();
}

Graph::Graph(std::shared_ptr<const ir::Graph> g, const GraphOptions& options)
    : ir_(std::move(g)), arena_(options.arena) {
  run_runtime_stages(*this, options);
}

void Graph::lower(const GraphOptions& options) {
  std::unordered_map<const ir::Value*, Edge*> edge_of;
  auto edge_for = [&](const ir::Value* v) -> Edge* {
    auto it = edge_of.find(v);
    if (it != edge_of.end()) return it->second;
    KILN_CHECK(v->is_constant(), cat("cpu::Graph: value '", v->name(), "' is used before it is produced"));
    Edge* e = new_edge(v->name(), v->constant().dtype(), v->constant().shape());
    e->kind = Edge::Kind::constant;
    e->constant = v->constant();
    e->data = e->constant.raw();
    edge_of[v] = e;
    return e;
  };
  for (const ir::Value* in : ir_->inputs()) {
    KILN_CHECK(in->type.shape.is_static(), cat("cpu::Graph: input '", in->name(), "' has no static shape"));
    Edge* e = new_edge(in->name(), in->type.dtype, in->type.shape.to_shape());
    e->kind = Edge::Kind::input;
    edge_of[in] = e;
    input_edges_.push_back(e);
  }
  for (const ir::Node* n : ir_->topo_order()) {
    auto node = make_node(*n);
    node->bf16 = options.bf16;
    node->snippets_isa = options.snippets_isa;
    node->shapes_vary = options.shapes_vary;
    for (const ir::Value* in : n->inputs()) node->inputs.push_back(in ? edge_for(in) : nullptr);
    for (const ir::Value* out : n->outputs()) {
      KILN_CHECK(out->type.shape.is_static(),
                 cat(n->describe(), ": output '", out->name(), "' has no static shape ", out->type.shape.to_string()));
      Edge* e = new_edge(out->name(), out->type.dtype, out->type.shape.to_shape());
      edge_of[out] = e;
      node->outputs.push_back(e);
    }
    nodes_.push_back(std::move(node));
  }
  for (const ir::Value* out : ir_->outputs()) output_edges_.push_back(edge_for(out));
}

// bf16: a convolution computes on bf16 inputs anyway, so one whose output only other bf16
// convolutions read (as their source, not as a sum operand) writes bf16 and the f32 -> bf16
// Reorder in front of each reader disappears. Not with a sum or depthwise post-op (their
// operands would have to be bf16 too), not for graph outputs. A snippets Subgraph read only by
// bf16 convolutions is asked the same (its kernel stores bf16 where the CPU can).
void Graph::keep_bf16_between_convolutions() {
  auto conv = [](const Node* n) { return std::string(n->type()) == "Convolution" && n->bf16; };
  auto subgraph = [](const Node* n) { return std::string(n->type()) == "Subgraph" && n->bf16; };
  for (auto& n : nodes_) {
    if (!(conv(n.get()) || subgraph(n.get())) || n->outputs.size() != 1) continue;
    const PostOpList* ops = n->post_ops();
    if (ops && (ops->sum_input() >= 0 || ops->dw())) continue;
    Edge* out = n->outputs[0];
    if (is_graph_output(out) || out->dtype != DType::f32) continue;
    auto readers = consumers(out);
    bool ok = !readers.empty();
    for (Node* r : readers) {
      const PostOpList* rops = r->post_ops();
      ok = ok && conv(r) && r->inputs[0] == out && !(rops && rops->dw());
      for (size_t i = 1; ok && i < r->inputs.size(); ++i) ok = r->inputs[i] != out;
    }
    if (ok) n->bf16_output = true;
  }
}

std::vector<Node*> Graph::consumers(const Edge* e) const {
  std::vector<Node*> out;
  for (auto& n : nodes_)
    for (Edge* in : n->inputs)
      if (in == e) {
        out.push_back(n.get());
        break;
      }
  return out;
}

bool Graph::is_graph_output(const Edge* e) const {
  for (Edge* o : output_edges_)
    if (o == e) return true;
  return false;
}

int Graph::position(const Node* n) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].get() == n) return static_cast<int>(i);
  return -1;
}

void Graph::absorb(Node* host, Node* absorbed) {
  const int h = position(host), a = position(absorbed);
  KILN_CHECK(h >= 0 && a > h, cat("cpu::Graph::absorb: '", absorbed->name, "' does not run after '", host->name, "'"));
  host->outputs = absorbed->outputs;
  host->fused.push_back(absorbed->name);
  host->fused.insert(host->fused.end(), absorbed->fused.begin(), absorbed->fused.end());
  std::unique_ptr<Node> keep = std::move(nodes_[static_cast<size_t>(h)]);
  absorbed_.push_back(std::move(nodes_[static_cast<size_t>(a)]));  // callers may still read it
  nodes_[static_cast<size_t>(a)] = std::move(keep);  // host runs where absorbed ran
  nodes_.erase(nodes_.begin() + h);
}

void Graph::prepare_all() {
  std::vector<std::unique_ptr<Node>> ordered;
  std::map<std::pair<Edge*, std::string>, Edge*> reordered;  // (edge, target layout) -> converted edge
  auto convert = [&](Edge* e, const dnnl::memory::desc& target, const std::string& key) -> Edge* {
    auto it = reordered.find({e, key});
    if (it != reordered.end()) return it->second;
    auto r = make_reorder_node(e->name + "/reorder", target);
    r->inputs = {e};
    Edge* out = new_edge(e->name + "/" + key, e->dtype, e->shape);
    r->outputs = {out};
    r->prepare();
    ordered.push_back(std::move(r));
    reordered[{e, key}] = out;
    return out;
  };
  auto desc_key = [](const dnnl::memory::desc& d) {
    const auto& c = d.data;
    std::string k = "L";
    for (int i = 0; i < c.ndims; ++i) k += cat(c.padded_dims[i], ".");
    if (c.format_kind == dnnl_blocked) {
      for (int i = 0; i < c.ndims; ++i) k += cat(c.format_desc.blocking.strides[i], ",");
      for (int i = 0; i < c.format_desc.blocking.inner_nblks; ++i)
        k += cat("b", c.format_desc.blocking.inner_blks[i], "@", c.format_desc.blocking.inner_idxs[i]);
    }
    return k + cat("t", static_cast<int>(c.data_type));
  };
  for (auto& node : nodes_) {
    auto reqs = node->prepare();
    for (size_t i = 0; i < node->inputs.size() && i < reqs.size(); ++i) {
      Edge* e = node->inputs[i];
      if (!e) continue;
      const InputLayout& r = reqs[i];
      if (r.kind == InputLayout::Kind::plain && !e->is_plain()) {
        node->inputs[i] = convert(e, *plain_desc(e->shape, e->dtype), "plain");
      } else if (r.kind == InputLayout::Kind::exact && !(e->desc() == r.desc)) {
        node->inputs[i] = convert(e, r.desc, desc_key(r.desc));
      }
    }
    ordered.push_back(std::move(node));
  }
  for (auto& e : output_edges_)
    if (!e->is_plain()) e = convert(e, *plain_desc(e->shape, e->dtype), "plain");
  nodes_ = std::move(ordered);
}

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

void Graph::plan_concat_in_place() {
  std::unordered_map<const Edge*, int> graph_output;
  for (Edge* e : output_edges_) graph_output[e] = 1;
  for (auto& node : nodes_) {
    const int axis = node->concat_axis();
    if (axis < 0) continue;
    Edge* out = node->outputs[0];
    if (out->kind != Edge::Kind::arena || out->alias_of) continue;
    // every input must be a buffer of its own whose bytes are exactly one contiguous
    // slice of the output in the output's layout (e.g. N = 1 and whole channel blocks)
    std::vector<size_t> offsets;
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
        if (!same_layout(sub, in->desc()) || byte_off + in->bytes() > out->bytes()) ok = false;
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
    }
    node->set_inputs_in_output();
    ++concat_in_place_nodes_;
  }
}

void Graph::plan_memory() {
  // views share their input's bytes: their root buffer lives as long as any view is read
  for (auto& n : nodes_)
    if (int k = n->output_aliases_input(); k >= 0) {
      n->outputs[0]->alias_of = root_of(n->inputs[static_cast<size_t>(k)]);
      n->outputs[0]->alias_offset = offset_in_root(n->inputs[static_cast<size_t>(k)]);
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
  if (!arena_) arena_ = std::make_shared<Arena>();
  bind_arena(arena_->reserve(arena_bytes_));
  for (auto& e : edges_) e->bind_memory();
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
    last[r] = last.count(out) ? last[out] : step;
    ++in_place_nodes_;
  }
}

void Graph::bind_views() {
  for (auto& e : edges_)
    if (e->alias_of) e->data = static_cast<char*>(root_of(e.get())->data) + offset_in_root(e.get());
  for (auto& e : edges_) e->rebind_data();
}

// "brgconv:avx512_core" + f32 -> "brgconv_avx512_core_f32" (the counters' exec type).
static std::string exec_type_of(const Node& n) {
  std::string t = n.impl;
  for (char& c : t)
    if (c == ':' || c == ' ') c = '_';
  DType dt = n.outputs.empty() ? DType::undefined : n.outputs[0]->dtype;
  return cat(t, "_", dtype_name(dt));
}

std::vector<Tensor> Graph::run(const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile,
                               std::vector<Tensor>* reuse) {
  KILN_CHECK(inputs.size() == input_edges_.size(),
             cat("cpu::Graph: ", inputs.size(), " inputs given, ", input_edges_.size(), " expected"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge* e = input_edges_[i];
    KILN_CHECK(inputs[i].shape() == e->shape && inputs[i].dtype() == e->dtype,
               cat("cpu::Graph: input '", e->name, "' is ", dtype_name(inputs[i].dtype()),
                   shape_to_string(inputs[i].shape()), ", the plan was made for ", dtype_name(e->dtype),
                   shape_to_string(e->shape)));
    e->data = const_cast<void*>(inputs[i].raw());
  }
  // the arena may have grown (and moved) for another graph sharing it
  if (void* base = arena_->reserve(arena_bytes_); base != arena_base_) bind_arena(base);
  // Outputs: written in place into the returned tensors where the plan allows (the previous
  // run's when the caller holds none), else copied out of the arena after the run.
  std::vector<Tensor> out(output_edges_.size());
  for (size_t i = 0; i < output_edges_.size(); ++i) {
    Edge* e = output_edges_[i];
    if (reuse && i < reuse->size()) {
      Tensor& old = (*reuse)[i];
      if (old.use_count() == 1 && old.dtype() == e->dtype && old.shape() == e->shape) out[i] = std::move(old);
    }
    if (!out[i].defined()) out[i] = Tensor::uninitialized(e->dtype, e->shape);  // written whole
    if (output_direct_[i]) e->data = out[i].raw();
  }
  bind_views();  // views of inputs and outputs follow the user's buffers
  dnnl::stream stream(cpu_engine());
  if (profile) {
    if (profile_row_of_node_.size() != nodes_.size()) {
      profile_rows_.clear();
      profile_row_of_node_.clear();
      for (auto& n : nodes_) {
        ProfilingInfo row;
        row.node_name = n->name;
        row.node_type = n->type();
        row.exec_type = exec_type_of(*n);
        profile_row_of_node_.push_back(profile_rows_.size());
        profile_rows_.push_back(std::move(row));
        for (const std::string& f : n->fused) {  // the layers this node absorbed
          ProfilingInfo gone;
          gone.status = ProfilingInfo::Status::optimized_out;
          gone.node_name = f;
          gone.node_type = n->type();
          gone.exec_type = "undef";
          gone.fused_into = n->name;
          profile_rows_.push_back(std::move(gone));
        }
      }
    }
    *profile = profile_rows_;
    // between one node's timer and the next only the timers run (their CPU clock reads)
    for (size_t i = 0; i < nodes_.size(); ++i) {
      NodeTimer timer;
      timer.start();
      nodes_[i]->execute(stream);
      stream.wait();
      timer.stop((*profile)[profile_row_of_node_[i]]);
    }
  } else {
    for (auto& n : nodes_) n->execute(stream);
  }
  stream.wait();
  for (size_t i = 0; i < output_edges_.size(); ++i) {
    Edge* e = output_edges_[i];
    if (!output_direct_[i] && e->bytes()) std::memcpy(out[i].raw(), e->data, e->bytes());
  }
  bind_arena(arena_base_);  // direct outputs back to their arena buffers: the tensors are the caller's now
  return out;
}

size_t Graph::quick_nodes() const {
  return static_cast<size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->quick_impl; }));
}

std::string Graph::describe() const {
  std::ostringstream os;
  os << "cpu::Graph: " << nodes_.size() << " nodes, arena " << arena_bytes_ << " bytes, " << in_place_nodes_
     << " in place, " << concat_in_place_nodes_ << " concats in place\n";
  for (auto& n : nodes_) {
    os << "  " << n->name << " : " << n->type() << " [" << n->impl << "] ->";
    for (Edge* e : n->outputs) os << " " << e->name << " " << shape_to_string(e->shape) << " " << e->layout_name();
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::cpu
