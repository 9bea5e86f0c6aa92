// Concat (f32, or u8 / s8: an int8 network's tensors) on oneDNN's concat primitive. Sources are taken in whatever layout their
// producers made (constants plain); oneDNN converts while it copies. The destination
// layout: when every consumer runs on any layout (convolutions, pools, norms,
// activations: inception and densenet blocks), the non-plain layout carrying most of
// the data, so the block stays in the convolutions' layout; otherwise (e.g. shufflenet's
// Reshape) the layout carrying most data, ties to plain. A source in another layout
// that other nodes read too (densenet's block input, read by every layer's concat) is
// converted once by a shared Reorder, so each concat is a same-layout copy (oneDNN's
// jit "simple" concat instead of one reorder per source). oneDNN also writes channel
// blocks at channel offsets that are not a multiple of the block. Should it reject a
// layout, the destination is plain. A single-input Concat is a view of its input.
//
// When every source already has the destination's layout and that layout is row-major in
// some order of the dims (plain, or channels-last), the output is, in memory, `outer` rows
// each made of one run of every source: the node copies those runs itself (RowCopy), which
// measured 1.5-2.3x faster than oneDNN 2.6's simple concat on channels-last activations
// (2 threads, [1,64,55,55] + [1,64,55,55]: 0.023 vs 0.043 ms; [1,256,28,28] + [1,32,28,28]:
// 0.011 vs 0.016 ms), which copies per element block. Channel blocks along the channels (each
// source whole blocks) are such runs too, one per image and source (channel_block_copy).
// A source in another layout (a Winograd convolution's channel blocks beside channels-last
// branches) is then written by a oneDNN reorder straight into its slice of the output (a
// sub-memory of the destination), instead of sending the whole Concat to oneDNN's generic
// concat, which copied such a mix at 4-5 GB/s (DenseNet-121: 0.7-0.8 ms per Concat).
//
// With a channel affine (FuseConcatAndBatchNorm: the BatchNormalization, and its ReLU, that
// alone reads the Concat's output) the row copy computes it as it copies: one pass over the
// data instead of two. Its destination is then plain, channels-last or channel-blocked, and
// its inputs are never placed inside it (the producers' bytes are not the output's); where the
// row copy does not run (channel blocks, sources converted or in another layout) the node
// concatenates as above and then applies the affine over its output in place.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "core/strings.hpp"
#include "cpu/channel_affine.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/work_share.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "ir/infer_util.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

tag plain_tag(size_t rank) {
  static const tag tags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  return tags[rank - 1];
}

// The format tag of a blocked edge among the activation layouts producers make
// (channels-last, channel blocks of 16/8/4), or -1 (also for a plain edge).
int tag_of(const Edge& e) {
  if (e.is_plain()) return -1;
  static const std::vector<tag> by_rank[] = {
      {},
      {},
      {tag::acb, tag::aBc16b, tag::aBc8b, tag::aBc4b},
      {tag::acdb, tag::aBcd16b, tag::aBcd8b, tag::aBcd4b},
      {tag::acdeb, tag::aBcde16b, tag::aBcde8b, tag::aBcde4b},
      {}};
  const size_t r = e.shape.size();
  if (r < 1 || r > 6) return -1;
  // the one candidate the blocking can be (channels-last: no inner block; else one block of the
  // channels), compared in full: a Concat of dozens of sources asked this of each several times,
  // and every candidate made cost a descriptor (DenseNet-121: about 1 ms of a new shape's plan)
  const auto& blk = e.blocked->data.format_desc.blocking;
  if (e.blocked->data.format_kind != dnnl_blocked) return -1;
  int64_t want = 0;  // 0: channels-last, else the block
  if (blk.inner_nblks == 1 && blk.inner_idxs[0] == 1) want = blk.inner_blks[0];
  else if (blk.inner_nblks != 0) return -1;
  for (tag t : by_rank[r - 1]) {
    const int64_t block = t == by_rank[r - 1][0] ? 0 : t == by_rank[r - 1][1] ? 16 : t == by_rank[r - 1][2] ? 8 : 4;
    if (block == want)
      return memory::desc(to_dims(e.shape), *dnnl_type(e.dtype), t) == *e.blocked ? static_cast<int>(t) : -1;
  }
  return -1;
}

// Does every consumer of the node's output run on any layout (so a blocked output costs
// no reorder later)? The cpu node kinds that take their producer's layout as it is.
bool consumers_take_any_layout(const ir::Node& n) {
  const auto& uses = n.output(0)->uses();
  if (uses.empty()) return false;
  for (const ir::Use& u : uses) {
    const ir::Node& c = *u.node;
    if (!convolution_supports(c) && !pooling_supports(c) && !batch_norm_supports(c) && !concat_supports(c) &&
        !lrn_supports(c) && !resize_supports(c) && !eltwise_supports(c))
      return false;
  }
  return true;
}

bool is_channels_last(int t) {
  return t == static_cast<int>(tag::acb) || t == static_cast<int>(tag::acdb) || t == static_cast<int>(tag::acdeb);
}

// The order of the dims in memory, outermost first, of a plain or channels-last layout (the
// ones a row copy takes), or empty.
std::vector<size_t> memory_order(const Edge& e) {
  std::vector<size_t> order(e.shape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (e.is_plain()) return order;
  if (is_channels_last(tag_of(e))) {
    order.erase(order.begin() + 1);
    order.push_back(1);  // N, spatial..., C
    return order;
  }
  return {};
}

// A concatenation as `outer` rows of the output, each the sources' runs one after the other:
// source i contributes run[i] bytes at offset at[i] of a row of `row` bytes.
struct RowCopy {
  static constexpr int64_t kManyRows = 64;    // from this many rows, a thread takes whole rows
  static constexpr size_t kPiece = 64 * 1024;  // below: runs are cut into pieces of at most this
  int64_t outer = 0;
  size_t row = 0;
  std::vector<size_t> run, at;
  std::vector<bool> foreign;  // a source in another layout: not copied here (a reorder writes its slice)
  std::vector<size_t> first;  // outer < kManyRows: the pieces before (row o, source i), in that order
  int64_t inner = 1;          // elements of one index of `axis` in a run (1: the axis is innermost)
  int64_t block = 0;          // channel blocks of `block` (a run: [channels / block][inner][block]), else 0
};

// Channel blocks of b, concatenated along the channels, every source in the destination's
// layout with whole blocks: per image, each source's bytes are one run ([C_i / b][spatial][b])
// of the output's ([C / b][spatial][b]). Else nullopt (oneDNN's concat).
std::optional<RowCopy> channel_block_copy(const std::vector<Edge*>& srcs, const Edge& dst, int axis) {
  if (axis != 1 || dst.is_plain()) return std::nullopt;
  const int t = tag_of(dst);
  if (t < 0 || is_channels_last(t)) return std::nullopt;
  const memory::desc d = dst.desc();
  const auto& blk = d.data.format_desc.blocking;
  if (blk.inner_nblks != 1 || blk.inner_idxs[0] != 1) return std::nullopt;
  const int64_t b = blk.inner_blks[0];
  RowCopy rc;
  rc.block = b;
  rc.outer = dst.shape[0];
  for (size_t k = 2; k < dst.shape.size(); ++k) rc.inner *= dst.shape[k];
  for (const Edge* e : srcs) {
    if (!e || e->dtype != dst.dtype || e->shape[1] % b != 0) return std::nullopt;
    rc.foreign.push_back(e->is_plain() || tag_of(*e) != t);  // its slice written by a reorder
    rc.at.push_back(rc.row);
    rc.run.push_back(static_cast<size_t>(e->shape[1] * rc.inner) * dtype_size(dst.dtype));
    rc.row += rc.run.back();
  }
  if (std::count(rc.foreign.begin(), rc.foreign.end(), false) == 0) return std::nullopt;  // nothing to copy
  if (rc.outer < RowCopy::kManyRows) {
    rc.first = {0};
    for (int64_t o = 0; o < rc.outer; ++o)
      for (size_t i = 0; i < rc.run.size(); ++i)
        rc.first.push_back(rc.first.back() + (rc.foreign[i] ? 0 : (rc.run[i] + RowCopy::kPiece - 1) / RowCopy::kPiece));
  }
  return rc;
}

// The row copy of `srcs` into `dst` along `axis` when the destination's memory order is
// known and at least one source has it, else nullopt. Sources in that order are copied by
// it; the others are marked foreign (the node writes them by a reorder).
std::optional<RowCopy> row_copy(const std::vector<Edge*>& srcs, const Edge& dst, int axis) {
  const std::vector<size_t> order = memory_order(dst);
  if (order.empty()) return channel_block_copy(srcs, dst, axis);
  std::vector<bool> foreign;
  for (const Edge* e : srcs) {
    if (!e || e->dtype != dst.dtype) return std::nullopt;
    foreign.push_back(memory_order(*e) != order || e->is_plain() != dst.is_plain());
  }
  if (std::count(foreign.begin(), foreign.end(), false) == 0) return std::nullopt;  // nothing to copy by rows
  const size_t pos = static_cast<size_t>(std::find(order.begin(), order.end(), static_cast<size_t>(axis)) - order.begin());
  const size_t elem = dtype_size(dst.dtype);
  RowCopy rc;
  rc.foreign = std::move(foreign);
  rc.outer = 1;
  for (size_t k = 0; k < pos; ++k) rc.outer *= dst.shape[order[k]];
  for (size_t k = pos + 1; k < order.size(); ++k) rc.inner *= dst.shape[order[k]];
  for (const Edge* e : srcs) {
    size_t run = elem;
    for (size_t k = pos; k < order.size(); ++k) run *= static_cast<size_t>(e->shape[order[k]]);
    rc.at.push_back(rc.row);
    rc.run.push_back(run);
    rc.row += run;
  }
  if (rc.outer < RowCopy::kManyRows) {
    rc.first = {0};
    for (int64_t o = 0; o < rc.outer; ++o)
      for (size_t i = 0; i < rc.run.size(); ++i)
        rc.first.push_back(rc.first.back() + (rc.foreign[i] ? 0 : (rc.run[i] + RowCopy::kPiece - 1) / RowCopy::kPiece));
  }
  return rc;
}

class ConcatNode : public Node {
 public:
  explicit ConcatNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "Concat"; }
  NodeKind kind() const override { return NodeKind::Concat; }
  // one input: the output is that input (no copy)
  int output_aliases_input() const override { return inputs.size() == 1 ? 0 : -1; }
  // with an affine, the inputs stay where their producers wrote them
  int concat_axis() const override { return inputs.size() > 1 && !affine_ ? axis_ : -1; }
  // What may run the affine is cpu/fusion_rules' concat_takes_batch_norm; here what this node
  // needs of it.
  bool take_channel_affine(ChannelAffine affine, std::string* why) override {
    const Edge* out = outputs[0];
    std::string problem;
    if (inputs.size() < 2 || out->dtype != DType::f32 || out->shape.size() < 2)
      problem = "the Concat is no copy of f32 channels";
    else if (affine.scale.size() != static_cast<size_t>(out->shape[1]) || affine.shift.size() != affine.scale.size())
      problem = "the affine has not one value per channel";
    else if (affine_) problem = "it computes an affine already";
    if (!problem.empty()) {
      if (why) *why = problem;
      return false;
    }
    affine_ = std::move(affine);
    return true;
  }
  void set_inputs_in_output() override {
    in_output_ = true;
    impl = "in_place";
  }

  std::vector<InputLayout> prepare() override {
    Edge* out = outputs[0];
    const size_t n = inputs.size();
    if (n == 1) {
      impl = "view";
      out->blocked = inputs[0]->blocked;
      return {InputLayout::any()};
    }
    const int axis = static_cast<int>(
        ir::normalize_axis(source->attr_i("axis"), static_cast<int64_t>(out->shape.size()), *source));
    axis_ = axis;
    channel_of_.assign(n, 0);
    for (size_t i = 1; i < n; ++i) channel_of_[i] = channel_of_[i - 1] + inputs[i - 1]->shape[static_cast<size_t>(axis)];
    const int ptag = static_cast<int>(plain_tag(out->shape.size()));
    const memory::data_type dt = *dnnl_type(out->dtype);  // concat_supports: f32, u8 or s8
    // destination layout: with consumers that take any layout, the non-plain layout
    // carrying most data; otherwise the layout carrying most data, ties to plain
    std::vector<int> tags(n);
    std::map<int, int64_t> weight;  // format tag (or -1: none of the known ones) -> elements
    for (size_t i = 0; i < n; ++i) {
      tags[i] = inputs[i]->is_plain() ? ptag : tag_of(*inputs[i]);
      weight[tags[i]] += shape_size(inputs[i]->shape);
    }
    int target = ptag;
    int64_t best = weight.count(ptag) ? weight[ptag] : 0;
    if (consumers_take_any_layout(*source)) {
      best = 0;
      // ties: channel blocks, which oneDNN's convolutions and kiln's Winograd take and kiln's 1x1
      // ones take too (SqueezeNet's fire modules, a 1x1 beside a 3x3: 6 of its 8 Reorders gone in
      // a graph of variable shapes, 0.985 of the time); either is copied by rows
      for (auto& [t, w] : weight)
        if (t >= 0 && t != ptag && (w > best || (w == best && !is_channels_last(t)))) target = t, best = w;
    } else {
      for (auto& [t, w] : weight)
        if (w > best) target = t, best = w;
    }
    if (const std::optional<int> wanted = readers_layout(out->shape)) target = *wanted;
    if (affine_ && target < 0) target = ptag;  // the affine runs on the layouts it knows (apply_affine)
    const memory::desc plain = *plain_desc(out->shape, out->dtype);
    std::vector<memory::desc> srcs;
    std::vector<InputLayout> req(n, InputLayout::any());
    for (size_t i = 0; i < n; ++i) {
      srcs.push_back(inputs[i]->desc());
      // an input in another layout that other nodes read too: convert it once, by a
      // shared Reorder (densenet's block input feeds every layer's concat)
      const ir::Value* v = source->input(i);
      if (target >= 0 && target != ptag && tags[i] != target && inputs[i]->kind != Edge::Kind::constant &&
          v->uses().size() > 1) {
        srcs[i] = memory::desc(to_dims(inputs[i]->shape), dt, static_cast<tag>(target));
        req[i] = InputLayout::exact(srcs[i]);
      }
    }
    // Every source in the destination's layout, as this node reads it (a source converted by a
    // shared Reorder in the destination's): copy the rows ourselves (see the top); sources in
    // another layout each by a reorder into their slice. DenseNet-121 in the graphs of a model
    // whose shapes vary (its block inputs channels-last from kiln's 1x1 convolutions, its layers'
    // outputs in channel blocks from Winograd): 51 of its 58 Concats went to oneDNN's concat for
    // a converted source, 20.6 ms of a 66 ms inference at [1, 3, 224, 224].
    auto try_rows = [&] {
      std::vector<Edge*> as_read(inputs.begin(), inputs.end());
      std::vector<Edge> converted;  // (only as many as there are: an Edge is no small object)
      converted.reserve(static_cast<size_t>(
          std::count_if(req.begin(), req.end(), [](const InputLayout& r) { return r.kind == InputLayout::Kind::exact; })));
      for (size_t i = 0; i < n; ++i)
        if (req[i].kind == InputLayout::Kind::exact) {
          Edge& e = converted.emplace_back();
          e.dtype = inputs[i]->dtype;
          e.shape = inputs[i]->shape;
          e.blocked = req[i].desc;
          as_read[i] = &e;
        }
      foreign_.clear();
      rows_ = row_copy(as_read, *out, axis);
      if (!rows_) return;
      const memory::desc dst = out->desc();
      memory::dims offsets(out->shape.size(), 0);
      try {
        for (size_t i = 0; i < n; ++i) {
          if (rows_->foreign[i]) {
            const memory::desc slice = dst.submemory_desc(to_dims(inputs[i]->shape), offsets);
            foreign_.push_back({i, dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), inputs[i]->desc(),
                                                                                cpu_engine(), slice)),
                                slice, {}, nullptr});
          }
          offsets[static_cast<size_t>(axis)] += inputs[i]->shape[static_cast<size_t>(axis)];
        }
      } catch (const dnnl::error&) {  // no reorder into such a slice: oneDNN's concat does it all
        rows_.reset();
        foreign_.clear();
      }
    };
    // A destination layout known without oneDNN (plain, channels-last, channel blocks) is tried
    // by rows first: oneDNN's concat descriptor, 50 us for a DenseNet Concat of dozens of
    // sources, 2.9 of the 7.4 ms a new shape's plan took, is made only where oneDNN copies.
    rows_.reset();
    foreign_.clear();
    pd_ = {};
    if (target >= 0) {  // (plain among them)
      out->set_layout(target == ptag ? plain : memory::desc(to_dims(out->shape), dt, static_cast<tag>(target)));
      try_rows();
    }
    if (!rows_) {
      bool made = false;
      if (target != ptag) {
        try {
          if (target >= 0)
            pd_ = dnnl::concat::primitive_desc(memory::desc(to_dims(out->shape), dt, static_cast<tag>(target)), axis,
                                               srcs, cpu_engine());
          else
            pd_ = dnnl::concat::primitive_desc(axis, srcs, cpu_engine());  // oneDNN's choice
          made = true;
        } catch (const dnnl::error&) {
          // no implementation for that destination layout: plain below
        }
      }
      if (!made) {
        for (size_t i = 0; i < n; ++i) srcs[i] = inputs[i]->desc();
        req.assign(n, InputLayout::any());
        pd_ = dnnl::concat::primitive_desc(plain, axis, srcs, cpu_engine());
      }
      out->set_layout(pd_.dst_desc());
      if (target < 0 || !made) try_rows();  // a layout only oneDNN's descriptor told
    }
    if (rows_) impl = cat("rows", foreign_.empty() ? "" : "_reorders", affine_ ? "_affine" : "");
    else impl = cat(pd_.impl_info_str(), affine_ ? "+affine" : "");
    if (affine_) {  // the output's layout, for the affine in place
      const int t = tag_of(*out);
      block_ = 0;
      if (out->is_plain()) block_ = -1;
      else if (is_channels_last(t)) block_ = 1;
      else if (t >= 0) block_ = out->desc().data.format_desc.blocking.inner_blks[0];
      KILN_CHECK(block_ != 0 && (block_ < 2 || out->desc().data.format_desc.blocking.inner_nblks == 1),
                 cat("Concat '", name, "': a layout the fused BatchNormalization does not run on: ", out->layout_name()));
      if (block_ >= 2) {
        const size_t padded = static_cast<size_t>((out->shape[1] + block_ - 1) / block_ * block_);
        padded_scale_ = affine_->scale;
        padded_shift_ = affine_->shift;
        padded_scale_.resize(padded, 0.0f);
        padded_shift_.resize(padded, 0.0f);
      }
    }
    // oneDNN's primitive only where it copies: made with the rows copied too, it cost a new
    // shape's graph 0.25 ms for DeepLab-v3's pyramid (a reference concat of mixed layouts,
    // which makes a reorder per source) and never ran
    prim_ = rows_ ? dnnl::concat() : dnnl::concat(pd_);
    return req;
  }

  // The layout every reader of the output will ask for (Node::expected_input_layout) as a format
  // tag, when they agree on one this node writes (plain, channels-last, channel blocks), else
  // nullopt: DenseNet-121's Concats feed kiln's 1x1 convolutions, channels-last, in the graphs of
  // a model whose shapes vary, and their output in the channel blocks of most of their sources
  // was reordered again for each (7 ms of 46 at [1, 3, 224, 224]).
  std::optional<int> readers_layout(const Shape& shape) const {
    std::optional<int> agreed;
    for (const Node* r : output_readers)
      for (size_t j = 0; j < r->inputs.size(); ++j) {
        if (r->inputs[j] != outputs[0]) continue;
        const InputLayout want = r->expected_input_layout(j);
        int t = -1;
        if (want.kind == InputLayout::Kind::plain) {
          t = static_cast<int>(plain_tag(shape.size()));
        } else if (want.kind == InputLayout::Kind::exact) {
          Edge as_wanted;
          as_wanted.dtype = outputs[0]->dtype;
          as_wanted.shape = shape;
          as_wanted.set_layout(*want.desc);
          t = as_wanted.is_plain() ? static_cast<int>(plain_tag(shape.size())) : tag_of(as_wanted);
        }
        if (t < 0 || (agreed && *agreed != t)) return std::nullopt;
        agreed = t;
      }
    return agreed;
  }

  void execute(dnnl::stream& stream) override {
    if (inputs.size() == 1 || in_output_) return;
    if (rows_) {
      // the affine while copying, unless a reorder writes part of the output: then after it
      const bool fused = affine_ && foreign_.empty();
      copy_rows(*rows_, fused ? &*affine_ : nullptr);
      for (Foreign& f : foreign_) {  // each into its slice of the output
        if (f.at != outputs[0]->data) f.dst = memory(f.slice, cpu_engine(), f.at = outputs[0]->data);
        f.reorder.execute(stream, {{DNNL_ARG_FROM, inputs[f.input]->memory()}, {DNNL_ARG_TO, f.dst}});
      }
      if (affine_ && !fused) {
        stream.wait();
        apply_affine();
      }
      return;
    }
    std::unordered_map<int, memory> args;
    for (size_t i = 0; i < inputs.size(); ++i) args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = inputs[i]->memory();
    args[DNNL_ARG_DST] = outputs[0]->memory();
    prim_.execute(stream, args);
    if (affine_) {
      stream.wait();
      apply_affine();
    }
  }

 private:
  // Many rows: a thread takes whole rows. Few (a small image, a concat along the outermost
  // dim): the runs, cut into pieces of at most 64 KiB, are shared out one by one.
  // With `affine`, each run is written as the affine of its values (f32, concatenated along
  // the channels: a run of source i holds its channels from channel_of_[i] on, rc.inner values
  // each).
  void copy_rows(const RowCopy& rc, const ChannelAffine* affine) {
    auto* dst = static_cast<char*>(outputs[0]->data);
    const size_t n = inputs.size();
    auto src = [&](size_t i) { return static_cast<const char*>(inputs[i]->data); };
    // `bytes` of source i's run in row o from byte `from` on
    auto copy = [&](size_t o, size_t i, size_t from, size_t bytes) {
      char* d = dst + o * rc.row + rc.at[i] + from;
      const char* s = src(i) + o * rc.run[i] + from;
      if (!affine) {
        std::memcpy(d, s, bytes);
        return;
      }
      affine_span(reinterpret_cast<const float*>(s), reinterpret_cast<float*>(d), static_cast<int64_t>(from / sizeof(float)),
                  static_cast<int64_t>(bytes / sizeof(float)), channel_of_[i], rc, *affine);
    };
    // shared by WorkShare: each thread its contiguous share (the rows or images its producers'
    // threads wrote, where they split the same way), then the other's last ones, so that a thread
    // the host runs slower for a while does not hold the team
    if (rc.outer >= RowCopy::kManyRows) {
      parallel_share(rc.outer, [&](int64_t o) {
        for (size_t i = 0; i < n; ++i)
          if (!rc.foreign[i]) copy(static_cast<size_t>(o), i, 0, rc.run[i]);
      });
      return;
    }
    constexpr size_t kPiece = RowCopy::kPiece;
    const std::vector<size_t>& first = rc.first;
    const auto pieces = static_cast<int64_t>(first.back());
    parallel_share(pieces, [&](int64_t p) {
      const size_t job = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), static_cast<size_t>(p)) - first.begin()) - 1;
      const size_t o = job / n, i = job % n, from = (static_cast<size_t>(p) - first[job]) * kPiece;
      copy(o, i, from, std::min(kPiece, rc.run[i] - from));
    });
  }

  // The affine of `count` values of a run from value `from` on, where value j of the run is of
  // channel c0 + j / inner (channel blocks: c0 + j / (inner * block) * block + j % block, and
  // `from`, `count` whole rows of a block); src and dst point at value `from`.
  static void affine_span(const float* src, float* dst, int64_t from, int64_t count, int64_t c0, const RowCopy& rc,
                          const ChannelAffine& f) {
    const int64_t inner = rc.inner;
    if (rc.block > 0) {
      const int64_t b = rc.block;
      for (int64_t r = from / b, end = (from + count) / b; r < end;) {
        const int64_t blk = r / inner, stop = std::min(end, (blk + 1) * inner);
        const size_t at = static_cast<size_t>(c0 + blk * b);
        channel_affine::rows(src + (r * b - from), dst + (r * b - from), stop - r, b, f.scale.data() + at,
                             f.shift.data() + at, f.relu);
        r = stop;
      }
      return;
    }
    if (inner == 1) {
      channel_affine::rows(src, dst, 1, count, f.scale.data() + c0 + from, f.shift.data() + c0 + from, f.relu);
      return;
    }
    for (int64_t j = from, end = from + count; j < end;) {
      const int64_t c = c0 + j / inner, stop = std::min(end, (j / inner + 1) * inner);
      channel_affine::one_channel(src + (j - from), dst + (j - from), stop - j, f.scale[static_cast<size_t>(c)],
                                  f.shift[static_cast<size_t>(c)], f.relu);
      j = stop;
    }
  }

  // The affine over the whole output, in place, in its layout (block_: -1 plain, 1
  // channels-last, b >= 2 channel blocks of b, whose padding lanes stay zero).
  void apply_affine() {
    const ChannelAffine& f = *affine_;
    const Edge* out = outputs[0];
    auto* y = static_cast<float*>(out->data);
    const int64_t N = out->shape[0], C = out->shape[1];
    int64_t inner = 1;
    for (size_t k = 2; k < out->shape.size(); ++k) inner *= out->shape[k];
    if (block_ == -1) {  // [N][C][inner]
#pragma omp parallel for schedule(static)
      for (int64_t nc = 0; nc < N * C; ++nc)
        channel_affine::one_channel(y + nc * inner, y + nc * inner, inner, f.scale[static_cast<size_t>(nc % C)],
                                    f.shift[static_cast<size_t>(nc % C)], f.relu);
    } else if (block_ == 1) {  // [N * inner][C]
      const int64_t rows = N * inner;
#pragma omp parallel
      {
        const int64_t nthr = omp_get_num_threads(), ithr = omp_get_thread_num();
        const int64_t r0 = rows * ithr / nthr, r1 = rows * (ithr + 1) / nthr;
        channel_affine::rows(y + r0 * C, y + r0 * C, r1 - r0, C, f.scale.data(), f.shift.data(), f.relu);
      }
    } else {  // [N][ceil(C / b)][inner][b]; the padding lanes' scale and shift are 0: they stay 0
      const int64_t b = block_, blocks = (C + b - 1) / b;
#pragma omp parallel for schedule(static)
      for (int64_t nb = 0; nb < N * blocks; ++nb) {
        float* p = y + nb * inner * b;
        const size_t c0 = static_cast<size_t>(nb % blocks * b);
        channel_affine::rows(p, p, inner, b, padded_scale_.data() + c0, padded_shift_.data() + c0, f.relu);
      }
    }
  }

  dnnl::concat::primitive_desc pd_;
  dnnl::concat prim_;
  std::optional<RowCopy> rows_;  // set: execute() copies the rows itself
  struct Foreign {               // a source a reorder writes into its slice of the output
    size_t input;
    dnnl::reorder reorder;
    memory::desc slice;
    memory dst;                  // over the output's bytes at `at`
    void* at;
  };
  std::vector<Foreign> foreign_;
  std::optional<ChannelAffine> affine_;  // FuseConcatAndBatchNorm
  std::vector<int64_t> channel_of_;      // the channel each input starts at
  int64_t block_ = 0;                    // the output's layout for apply_affine
  std::vector<float> padded_scale_, padded_shift_;  // channel blocks: zeros for the padding lanes
  int axis_ = -1;
  bool in_output_ = false;  // every producer already wrote its slice of the output
};

}  // namespace

bool concat_supports(const ir::Node& n) {
  if (n.op_type() != "Concat" || !n.is_onnx_domain()) return false;
  if (n.num_inputs() < 1 || n.num_outputs() != 1 || !n.has_attr("axis")) return false;
  const ir::Value* y = n.output(0);
  const DType t = y->type.dtype;  // one type throughout, copied as it is
  if ((t != DType::f32 && t != DType::u8 && t != DType::i8) || !y->type.shape.is_static()) return false;
  const Shape ys = y->type.shape.to_shape();
  const int64_t rank = static_cast<int64_t>(ys.size());
  if (rank < 1 || rank > 6) return false;
  const int64_t axis = n.attr_i("axis");
  if (axis < -rank || axis >= rank) return false;
  for (const ir::Value* x : n.inputs()) {
    if (!x || x->type.dtype != t || !x->type.shape.is_static()) return false;
    const Shape xs = x->type.shape.to_shape();
    if (static_cast<int64_t>(xs.size()) != rank || shape_size(xs) == 0) return false;
  }
  return true;
}

std::unique_ptr<Node> make_concat_node(const ir::Node& n) { return std::make_unique<ConcatNode>(n); }

}  // namespace kiln::cpu
