// Subgraph: a kiln Subgraph (a piece of the model the snippets tokenizer cut out) run as one
// JIT kernel from the snippets generator (src/snippets/generator.hpp): every input loaded
// once, the whole elementwise chain computed in vector registers, every output stored once.
// Rows of the [rows, inner] schedule are split across the OpenMP team. Plain layouts in and
// out, or the producers' own layout: blocked (with broadcast inputs too when blocked on the
// channels only: per-channel inputs are then plain vectors), or a dim permutation such as
// channels-last, also with broadcast inputs. A body with a reduction or a Transpose runs plain. Where the
// generator cannot compile the body (an op it has no emitter for, several output shapes)
// the node runs the body on the reference kernels instead and its implementation says so
// ("ref:Subgraph").
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "cpu/emitters/x64/target_machine.hpp"
#include "core/strings.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "snippets/generator.hpp"
#include "snippets/op.hpp"
#include "snippets/subgraph_op.hpp"

namespace kiln::cpu {

namespace {

bool static_f32(const ir::Value* v) {
  return v && v->type.dtype == DType::f32 && v->type.shape.is_static();
}

// Whether `md` is a blocked layout without padding (channel blocks that divide the channels,
// or a dim permutation): its elements are the plain ones at other offsets, one each.
bool dense_unpadded(const dnnl::memory::desc& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked) return false;
  for (int i = 0; i < d.ndims; ++i)
    if (d.padded_dims[i] != d.dims[i]) return false;
  return true;
}

// The dim order (outermost first) of a dense layout that only permutes the dims (e.g.
// channels-last, acdb), or nothing for blocked or padded layouts. Dims of size 1 go first:
// their stride does not matter.
std::optional<std::vector<size_t>> dim_permutation(const dnnl::memory::desc& md) {
  const auto& d = md.data;
  if (!dense_unpadded(md) || d.format_desc.blocking.inner_nblks != 0) return std::nullopt;
  const size_t r = static_cast<size_t>(d.ndims);
  std::vector<size_t> order(r);
  std::iota(order.begin(), order.end(), size_t{0});
  const auto* st = d.format_desc.blocking.strides;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool a1 = d.dims[a] == 1, b1 = d.dims[b] == 1;
    if (a1 != b1) return a1;
    return st[a] > st[b];
  });
  int64_t expect = 1;
  for (size_t k = r; k-- > 0;) {
    const size_t i = order[k];
    if (d.dims[i] == 1) continue;
    if (st[i] != expect) return std::nullopt;
    expect *= d.dims[i];
  }
  return order;
}

// The layout a Subgraph over full-shape `inputs` runs in, when every input comes in a dense
// non-plain layout: theirs if they agree; else the one most of them have, ties going to a dim
// permutation, then to the earlier input (`*mixed` set: the others are converted). Nothing
// when an input is plain or padded (the kernel runs plain).
std::optional<dnnl::memory::desc> common_dense_layout(const std::vector<Edge*>& inputs, bool* mixed) {
  *mixed = false;
  std::vector<std::pair<dnnl::memory::desc, int>> votes;
  for (Edge* e : inputs) {
    if (e->is_plain() || !dense_unpadded(e->desc())) return std::nullopt;
    auto it = std::find_if(votes.begin(), votes.end(), [&](const auto& v) { return v.first == e->desc(); });
    if (it == votes.end()) votes.emplace_back(e->desc(), 1);
    else ++it->second;
  }
  if (votes.empty()) return std::nullopt;  // no inputs
  *mixed = votes.size() > 1;
  auto better = [](const std::pair<dnnl::memory::desc, int>& a, const std::pair<dnnl::memory::desc, int>& b) {
    if (a.second != b.second) return a.second > b.second;
    return dim_permutation(a.first).has_value() && !dim_permutation(b.first).has_value();
  };
  size_t best = 0;
  for (size_t i = 1; i < votes.size(); ++i)
    if (better(votes[i], votes[best])) best = i;
  return votes[best].first;
}

// `s` (numpy-aligned to rank r) in the dim order `perm`; with `plain`, null when its plain
// row-major bytes would not be that order's bytes (its dims larger than 1 change relative order).
std::optional<Shape> permute_shape(const Shape& s, const std::vector<size_t>& perm, bool plain) {
  const size_t r = perm.size();
  if (s.size() > r) return std::nullopt;
  Shape a(r - s.size(), 1);
  a.insert(a.end(), s.begin(), s.end());
  Shape p(r);
  std::vector<size_t> big_orig, big_perm;
  for (size_t k = 0; k < r; ++k) {
    p[k] = a[perm[k]];
    if (a[perm[k]] > 1) big_perm.push_back(perm[k]);
  }
  for (size_t i = 0; i < r; ++i)
    if (a[i] > 1) big_orig.push_back(i);
  if (plain && big_orig != big_perm) return std::nullopt;
  return p;
}

// `s` (numpy-aligned to the output's rank) in the blocked view [d0, C / B, d2.., B] of a
// channel-blocked output with C channels; null when its plain bytes are not in that order:
// the full shape (read in the blocked layout itself), a per-channel [.., C, 1, 1] (C / B
// blocks of B lanes) or one that is constant along the channels [.., 1, h, w] (one lane,
// broadcast over the block).
std::optional<Shape> blocked_view(const Shape& s, const Shape& out, int64_t B) {
  const size_t r = out.size();
  if (s.size() > r) return std::nullopt;
  Shape a(r - s.size(), 1);
  a.insert(a.end(), s.begin(), s.end());
  const int64_t C = out[1];
  bool trailing_ones = true;
  for (size_t d = 2; d < r; ++d) trailing_ones &= a[d] == 1;
  Shape v = {a[0]};
  if (a == out || (a[1] == C && trailing_ones)) {
    v.push_back(C / B);
  } else if (a[1] == 1) {
    v.push_back(1);
  } else {
    return std::nullopt;
  }
  v.insert(v.end(), a.begin() + 2, a.end());
  v.push_back(a[1] == 1 ? 1 : B);
  return v;
}

// `d` with bf16 elements at the same element strides, for layouts without inner blocks.
std::optional<dnnl::memory::desc> as_bf16(const dnnl::memory::desc& d) {
  const auto& md = d.data;
  if (md.format_kind != dnnl_blocked || md.format_desc.blocking.inner_nblks != 0) return std::nullopt;
  for (int i = 0; i < md.ndims; ++i)
    if (md.padded_dims[i] != md.dims[i]) return std::nullopt;
  dnnl::memory::dims strides(md.format_desc.blocking.strides, md.format_desc.blocking.strides + md.ndims);
  return dnnl::memory::desc(d.dims(), dnnl::memory::data_type::bf16, strides);
}

// The kernel shapes of `inputs` -> `out` in the dim permutation of `layout` (the full-shape
// inputs') when every broadcast input's plain bytes are in that order, else nothing.
std::optional<snippets::KernelShapes> permuted_view(const std::vector<Edge*>& inputs, const Shape& out,
                                                    const dnnl::memory::desc& layout) {
  if (layout.data.data_type != dnnl_f32) return std::nullopt;
  const std::optional<std::vector<size_t>> perm = dim_permutation(layout);
  if (!perm) return std::nullopt;
  snippets::KernelShapes ks;
  for (const Edge* e : inputs) {
    const bool full = e->shape == out;  // in the layout (the graph converts one that is not)
    auto p = permute_shape(e->shape, *perm, !full);
    if (!p) return std::nullopt;
    ks.inputs.push_back(*p);
  }
  ks.output = *permute_shape(out, *perm, false);
  return ks;
}

// The same in the blocked view of a layout blocked on the channels only.
std::optional<snippets::KernelShapes> channel_blocked_view(const std::vector<Edge*>& inputs, const Shape& out,
                                                           const dnnl::memory::desc& layout) {
  const std::optional<int64_t> B = channel_block(layout);
  if (!B) return std::nullopt;
  snippets::KernelShapes ks;
  for (const Edge* e : inputs) {
    auto v = blocked_view(e->shape, out, *B);
    if (!v) return std::nullopt;
    ks.inputs.push_back(*v);
  }
  ks.output = *blocked_view(out, out, *B);
  return ks;
}

// A body's lone op with the Subgraph's own input and output types. The body itself may hold
// symbolic dims: a model whose input shapes vary tokenizes once, and every shape's plan shares
// that body. The fusion rules and node factory read static shapes, so its op would have become
// a Reference node (one thread; RegNet's squeeze-excite Muls at 0.05-0.27 ms each where
// oneDNN's binary takes a few microseconds).
std::shared_ptr<ir::Graph> lone_op_graph(const ir::Graph& body, const ir::Node& subgraph) {
  const ir::Node& op = *body.nodes().front();
  auto g = std::make_shared<ir::Graph>();
  std::vector<ir::Value*> ins;
  for (ir::Value* v : op.inputs()) {
    if (!v) {
      ins.push_back(nullptr);
      continue;
    }
    if (ir::Value* seen = g->find_value(v->name())) {  // read twice, as Mul(x, x)
      ins.push_back(seen);
      continue;
    }
    const auto param = std::find(body.inputs().begin(), body.inputs().end(), v);
    if (param != body.inputs().end()) {
      const size_t k = static_cast<size_t>(param - body.inputs().begin());
      KILN_CHECK(k < subgraph.num_inputs() && subgraph.input(k),
                 cat(subgraph.describe(), ": body input ", k, " has no Subgraph input"));
      ins.push_back(g->add_input(v->name(), subgraph.input(k)->type));
    } else {
      KILN_CHECK(v->is_constant(), cat(subgraph.describe(), ": the lone op's input '", v->name(),
                                       "' is neither a body input nor a constant"));
      ins.push_back(g->add_constant(v->name(), v->constant()));
    }
  }
  std::vector<std::string> outs;
  for (const ir::Value* o : op.outputs()) outs.push_back(o->name());
  ir::Node* n = g->add_node(op.op_type(), ins, outs, op.name(), op.domain());
  n->attrs = op.attrs;
  n->set_opset(op.opset());
  for (size_t i = 0; i < n->num_outputs() && i < subgraph.num_outputs(); ++i) {
    n->output(i)->type = subgraph.output(i)->type;
    g->add_output(n->output(i));
  }
  return g;
}

class SubgraphNode : public Node {
 public:
  explicit SubgraphNode(const ir::Node& n) : Node(n) {
    // the ONNX nodes the tokenizer cut into the body: counters and the exec graph list them
    if (n.has_attr(snippets::kFusedAttr)) fused = n.attr_strings(snippets::kFusedAttr);
  }
  const char* type() const override { return "Subgraph"; }
  NodeKind kind() const override { return NodeKind::Subgraph; }

  std::vector<InputLayout> prepare() override {
    const std::shared_ptr<const ir::Graph> shared_body = source->attr_graph(snippets::kBodyAttr);
    const ir::Graph& body = *shared_body;
    snippets::KernelShapes shapes;
    for (Edge* e : inputs) shapes.inputs.push_back(e->shape);
    shapes.output = outputs[0]->shape;
    bool same = true;
    for (Edge* e : outputs) same &= e->shape == shapes.output;
    // A body with a reduction (the reduced dims must stay the inner block) or a Transpose (its
    // input's elements are not at the output's positions) runs in the plain shapes.
    bool plain_only = false;
    for (const ir::Node* n : body.nodes()) plain_only |= snippets::is_reduction_op(n->op_type()) || n->op_type() == "Transpose";
    // Canonicalization: inputs all of the output's shape and in one non-plain layout
    // without padding (e.g. channels-last or whole channel blocks after a convolution)
    // are the same elements at the same offsets: the kernel runs over them as flat
    // arrays and the outputs keep that layout, so no Reorder is needed around the node.
    bool all_full = same && !inputs.empty() && !plain_only;
    for (Edge* e : inputs) all_full = all_full && e->shape == shapes.output;
    // Inputs that all come in such layouts, but not the same one (a Winograd convolution's
    // channel blocks beside channels-last tensors), run in the layout most of them have, ties
    // going to a dim permutation (what the convolutions around write on AVX-512): the graph
    // converts the others. Before, the node ran plain, converting every input and its output.
    std::optional<dnnl::memory::desc> layout;
    bool mixed = false;
    if (all_full) layout = common_dense_layout(inputs, &mixed);
    // Canonicalization with broadcasting: the full-shape inputs keep the layout they come in
    // (the graph converts any that differ) and the broadcast inputs are read plain, when their
    // plain bytes are in that layout's order; the outputs keep the layout. Either a layout that
    // only permutes the dims (channels-last after a convolution; a per-channel [1, C, 1, 1]
    // is in NHWC order): the kernel runs on the permuted shapes; or one blocked on the
    // channels only (nChw16c): the kernel runs on the view [N, C / B, H, W, B], a per-channel
    // input being C / B plain vectors.
    std::optional<dnnl::memory::desc> bcast;
    bool bcast_blocked = false;
    if (same && !all_full && !plain_only) {
      const Edge* full = nullptr;
      for (Edge* e : inputs)
        if (e->shape == shapes.output && !e->is_plain()) full = e;
      std::optional<snippets::KernelShapes> view;
      if (full) view = permuted_view(inputs, shapes.output, full->desc());
      if (full && !view) {
        view = channel_blocked_view(inputs, shapes.output, full->desc());
        bcast_blocked = view.has_value();
      }
      if (view) {
        shapes = *view;
        bcast = full->desc();
      }
    }
    if (all_full) {
      // no broadcasting: the flat elements in chunks of a fixed size, split across threads; a
      // kernel per chunk size, not per shape, so a new input shape compiles nothing. The last
      // partial chunk runs through a zero-padded copy (run_tail).
      const int64_t n = shape_size(shapes.output);
      flat_ = true;
      chunks_ = n / kBigChunk;
      tail_ = n - chunks_ * kBigChunk;
      for (auto& in : shapes.inputs) in = Shape{kBigChunk};
      shapes.output = Shape{kBigChunk};
      const bool partial = tail_ % kSmallChunk != 0;  // run_tail's padded copies
      pad_.assign(partial ? (inputs.size() + outputs.size()) * static_cast<size_t>(kSmallChunk) : 0, 0.0f);
    } else {
      flat_ = false;
      chunks_ = 0;
      tail_ = 0;
    }
    bool converted = false;  // would the kernel need an input converted to plain?
    for (Edge* e : inputs) converted |= !e->is_plain();
    if (!layout && (!bcast || bcast_blocked) && converted && body.nodes().size() == 1) {
      // a lone op in a layout the kernel cannot run in: its own oneDNN node over the same
      // edges does better than Reorders around the kernel. Also in the channel-blocked view:
      // its rows are one vector each, and oneDNN's binary runs an SE block's per-channel Mul
      // there 1.5x faster (EfficientNet-B0 with oneDNN at AVX2: 0.28 vs 0.44 ms for 16 Muls,
      // and their inputs' Reorders); a body of several ops still saves passes over memory.
      lone_op_ = lone_op_graph(body, *source);
      fallback_ = make_node(*lone_op_->nodes().front());
      fallback_->name = name;
      fallback_->inputs = inputs;
      fallback_->outputs = outputs;
      auto req = fallback_->prepare();
      impl = fallback_->impl;
      return req;
    }
    // bf16 outputs (the readers are bf16 convolutions): the output layout in bf16, when it is
    // one oneDNN describes by strides (plain or a dim permutation)
    std::optional<dnnl::memory::desc> out_bf16;
    if (bf16_output && same && outputs.size() == 1) {
      if (bcast) out_bf16 = as_bf16(*bcast);
      else if (layout) out_bf16 = as_bf16(*layout);
      else out_bf16 = as_bf16(outputs[0]->desc());
    }
    if (same) {
      snippets::CompileOptions opt;
      opt.name = name;
      opt.target = x64::shared_target_machine(snippets_isa);
      for (bool bf16 : {true, false}) {
        if (bf16 && !out_bf16) continue;
        opt.bf16_outputs = bf16;
        try {
          if (all_full) {  // the chunk kernel where whole chunks run, the small one for the rest
            snippets::KernelShapes small = shapes;
            for (auto& in : small.inputs) in = Shape{kSmallChunk};
            small.output = Shape{kSmallChunk};
            small_kernel_ = tail_ > 0 || chunks_ == 0 ? snippets::compile_cached(shared_body, small, opt) : nullptr;
            kernel_ = chunks_ > 0 ? snippets::compile_cached(shared_body, shapes, opt) : small_kernel_;
          } else {
            kernel_ = snippets::compile_cached(shared_body, shapes, opt);
          }
          break;
        } catch (const Error&) {
          // bf16 stores need avx512_bf16 (f32 next); an op without emitter, too many
          // registers: the reference kernels below
        }
      }
    }
    if (!kernel_) {  // the body on the reference kernels, by a Reference node over the same edges
      fallback_ = make_reference_node(*source);
      fallback_->inputs = inputs;
      fallback_->outputs = outputs;
      auto req = fallback_->prepare();
      impl = "ref:Subgraph";
      return req;
    }
    const bool bf16_out = kernel_->output_bytes() == 2;  // out_bf16 is the output's layout
    if (bcast) {
      impl = "snippet_" + kernel_->isa() + (bcast_blocked ? "_blocked" : "_permuted");
      std::vector<InputLayout> req;
      for (Edge* e : inputs)
        req.push_back(e->shape == outputs[0]->shape ? InputLayout::exact(*bcast) : InputLayout::plain());
      for (Edge* e : outputs) e->set_layout(bf16_out ? *out_bf16 : *bcast);
      return req;
    }
    if (!layout) {  // plain row-major
      impl = "snippet_" + kernel_->isa();  // the counters add the precision: snippet_avx512_f32
      for (Edge* e : outputs) {
        e->blocked.reset();
        if (bf16_out) e->set_layout(*out_bf16);
      }
      return std::vector<InputLayout>(inputs.size(), InputLayout::plain());
    }
    impl = "snippet_" + kernel_->isa() + "_blocked";
    for (Edge* e : outputs) e->set_layout(bf16_out ? *out_bf16 : *layout);
    if (mixed) return std::vector<InputLayout>(inputs.size(), InputLayout::exact(*layout));
    return std::vector<InputLayout>(inputs.size(), InputLayout::any());
  }

  void execute(dnnl::stream& stream) override {
    if (fallback_) {
      fallback_->inputs = inputs;  // the graph may have put Reorders in front since prepare()
      return fallback_->execute(stream);
    }
    stream.wait();  // oneDNN work before this node must be complete
    std::vector<const float*> ins;
    std::vector<float*> outs;
    for (Edge* e : inputs) ins.push_back(static_cast<const float*>(e->data));
    for (Edge* e : outputs) outs.push_back(static_cast<float*>(e->data));
    if (flat_) {  // no broadcasting: chunks of the flat elements, split across threads
      const int threads = chunks_ * kBigChunk < 16384 || kernel_->debug() ? 1 : std::max(1, omp_get_max_threads());
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t c = 0; c < chunks_; ++c) {
        std::vector<const float*> ci(ins.size());
        std::vector<float*> co(outs.size());
        for (size_t i = 0; i < ins.size(); ++i) ci[i] = ins[i] + c * kBigChunk;
        for (size_t i = 0; i < outs.size(); ++i) co[i] = at_element(outs[i], c * kBigChunk);
        kernel_->run(ci, co, 0, kernel_->rows());
      }
      if (tail_ > 0) run_tail(ins, outs, chunks_ * kBigChunk);
      return;
    }
    const int64_t rows = kernel_->rows();
    const int64_t work = rows * kernel_->inner();
    const int threads = work < 16384 || kernel_->debug() ? 1 : std::max(1, omp_get_max_threads());
    if (threads == 1 || rows == 1) {
      kernel_->run(ins, outs, 0, rows);
      return;
    }
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
      const int64_t begin = rows * t / n, end = rows * (t + 1) / n;
      if (begin < end) kernel_->run(ins, outs, begin, end);
    }
  }

 private:
  // Without broadcasting the kernels take a fixed number of elements, whatever the shape.
  static constexpr int64_t kBigChunk = 4096;   // the chunks the threads share
  static constexpr int64_t kSmallChunk = 256;  // the rest, after the last whole big chunk

  // `p` advanced by `elements` outputs (bf16 outputs: 2-byte elements).
  float* at_element(float* p, int64_t elements) const {
    return reinterpret_cast<float*>(reinterpret_cast<char*>(p) + elements * kernel_->output_bytes());
  }

  // Elements [from, from + tail_): whole small chunks in place, the last partial one through
  // zero-padded copies of its inputs and outputs.
  void run_tail(const std::vector<const float*>& ins, const std::vector<float*>& outs, int64_t from) {
    const snippets::Kernel& k = *small_kernel_;
    std::vector<const float*> ci(ins.size());
    std::vector<float*> co(outs.size());
    int64_t at = from;
    for (const int64_t end = from + tail_; end - at >= kSmallChunk; at += kSmallChunk) {
      for (size_t i = 0; i < ins.size(); ++i) ci[i] = ins[i] + at;
      for (size_t i = 0; i < outs.size(); ++i) co[i] = at_element(outs[i], at);
      k.run(ci, co, 0, k.rows());
    }
    const int64_t rest = from + tail_ - at;
    if (rest == 0) return;
    std::fill(pad_.begin(), pad_.end(), 0.0f);  // (sized by prepare(): nothing allocated here)
    for (size_t i = 0; i < ins.size(); ++i) {
      float* p = pad_.data() + i * kSmallChunk;
      std::copy(ins[i] + at, ins[i] + at + rest, p);
      ci[i] = p;
    }
    for (size_t i = 0; i < outs.size(); ++i) co[i] = pad_.data() + (ins.size() + i) * kSmallChunk;
    k.run(ci, co, 0, k.rows());
    for (size_t i = 0; i < outs.size(); ++i)
      std::memcpy(at_element(outs[i], at), co[i], static_cast<size_t>(rest * k.output_bytes()));
  }

  std::shared_ptr<const snippets::Kernel> kernel_;  // shared through the kernel cache
  std::shared_ptr<const snippets::Kernel> small_kernel_;  // no broadcasting: the kSmallChunk kernel, for the tail
  std::unique_ptr<Node> fallback_;  // when the generator refused the body
  std::shared_ptr<ir::Graph> lone_op_;  // the lone op a oneDNN fallback_ runs (lone_op_graph)
  // no broadcasting (`flat_`): `chunks_` whole chunks of kBigChunk elements, then `tail_` more
  bool flat_ = false;
  int64_t chunks_ = 0, tail_ = 0;
  std::vector<float> pad_;  // the padded copies of run_tail
};

}  // namespace

bool subgraph_supports(const ir::Node& n) {
  if (!snippets::is_subgraph(n) || n.num_outputs() < 1) return false;
  for (const ir::Value* v : n.inputs())
    if (!static_f32(v)) return false;
  for (const ir::Value* v : n.outputs())
    if (!static_f32(v)) return false;
  return true;
}

std::unique_ptr<Node> make_subgraph_node(const ir::Node& n) { return std::make_unique<SubgraphNode>(n); }

}  // namespace kiln::cpu
