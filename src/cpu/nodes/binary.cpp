// Binary: ONNX Add, Sub, Mul, Div, Max, Min (f32, exactly two inputs) on oneDNN's binary
// primitive, with numpy broadcasting.
//
// oneDNN wants src0 to have the output's full shape and src1 the same rank with each dim
// equal to src0's or 1. So: the operand with the output shape becomes src0 (for
// Add/Mul/Max/Min the operands are swapped when only the second one has it; Sub is
// swapped and computed as an Add with src0 scaled by -1, -b + a being exactly a - b; Div
// with a broadcast dividend stays on Reference); a lower-rank operand gets leading 1s.
//
// oneDNN 2.6 bugs this works around (both on blocked layouts whose channels are padded,
// e.g. 17 channels in nChw8c / nChw16c; tests/unit/test_cpu_eltwise.cpp covers each):
// - its jit:uni binary with an eltwise post-op writes past the end of dst (heap
//   corruption) and leaves the last channel block wrong, hence the src0 scale above;
// - run in place (dst == src0) it leaves the last channel block without the operation,
//   so on such layouts the output never reuses src0's memory.
//
// Layouts, tried best first (the first with a JIT kernel wins, else the first oneDNN
// takes): src0 in the layout its producer made (blocked / channels-last after a
// convolution; the output keeps it) with a same-shape src1 in that same layout, or a
// broadcast src1 (per-channel [1,C,1,1], a scalar) in src0's layout (constants are
// reordered once, at compile time) or plain; then everything row-major, with the dims
// merged into the simplest equivalent broadcast ([1,128,768] - [1,128,1] runs as
// [128,768] - [128,1]), for which oneDNN more often has a JIT kernel.
//
// NaN: Max/Min return the other operand where src0 is NaN (ONNX's numpy reference
// propagates it); everything else, infinities included, gives ONNX's result.
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::algorithm;
using dnnl::memory;

struct BinarySpec {
  algorithm alg;
  bool swap = false;    // src0 is ONNX input 1
  bool negate = false;  // Sub with swapped operands: dst = -1 * src0 + src1
  bool commutative = false;
  bool is_sub = false;
};

// v's dims padded with leading 1s to rank `r` into `out` (r <= 6), if v is an f32 tensor of
// static shape and rank <= r. No allocation: binary_spec runs for every Add / Mul / ... of every
// new input shape, in the lowering and in the fusion rules.
bool static_f32_dims(const ir::Value* v, size_t r, int64_t (&out)[6]) {
  if (!v) return false;
  if (v->is_constant()) {
    if (v->constant().dtype() != DType::f32) return false;
    const Shape& s = v->constant().shape();
    if (s.size() > r) return false;
    for (size_t i = 0; i < r; ++i) out[i] = i < r - s.size() ? 1 : s[i - (r - s.size())];
    return true;
  }
  const ir::PartialShape& s = v->type.shape;
  if (v->type.dtype != DType::f32 || !s.rank_known || !s.is_static() || s.rank() > r) return false;
  for (size_t i = 0; i < r; ++i) out[i] = i < r - s.rank() ? 1 : s.dims[i - (r - s.rank())].value;
  return true;
}

// s with leading 1s up to rank r.
Shape pad_rank(const Shape& s, size_t r) {
  Shape p(r - s.size(), 1);
  p.insert(p.end(), s.begin(), s.end());
  return p;
}

std::optional<BinarySpec> binary_spec(const ir::Node& n) {
  if (!n.is_onnx_domain()) return std::nullopt;
  const std::string_view op = n.op_type();  // a view: each test below compares the length first
  algorithm alg;
  bool commutative = true;
  if (op == "Add") alg = algorithm::binary_add;
  else if (op == "Mul") alg = algorithm::binary_mul;
  else if (op == "Max") alg = algorithm::binary_max;
  else if (op == "Min") alg = algorithm::binary_min;
  else if (op == "Sub") alg = algorithm::binary_sub, commutative = false;
  else if (op == "Div") alg = algorithm::binary_div, commutative = false;
  else return std::nullopt;
  if (n.num_inputs() != 2 || n.num_outputs() != 1 || !n.has_input(0) || !n.has_input(1)) return std::nullopt;
  const ir::Value* y = n.output(0);
  const ir::PartialShape& yp = y->type.shape;
  if (y->type.dtype != DType::f32 || !yp.rank_known || !yp.is_static() || yp.rank() == 0 || yp.rank() > 6)
    return std::nullopt;
  const size_t r = yp.rank();
  int64_t ys[6], pa[6], pb[6];
  for (size_t i = 0; i < r; ++i) ys[i] = yp.dims[i].value;
  if (!static_f32_dims(n.input(0), r, pa) || !static_f32_dims(n.input(1), r, pb)) return std::nullopt;
  if (std::any_of(ys, ys + r, [](int64_t d) { return d == 0; })) return std::nullopt;  // no elements
  for (size_t i = 0; i < r; ++i)
    if ((pa[i] != ys[i] && pa[i] != 1) || (pb[i] != ys[i] && pb[i] != 1)) return std::nullopt;
  const bool a_full = std::equal(pa, pa + r, ys), b_full = std::equal(pb, pb + r, ys);
  const bool sub = op == "Sub";
  if (a_full) return BinarySpec{alg, false, false, commutative, sub};
  if (!b_full) return std::nullopt;  // both broadcast ([N,1] + [1,M]): not one oneDNN binary
  if (commutative) return BinarySpec{alg, true, false, true, false};
  if (sub) return BinarySpec{alg, true, true, false, true};
  return std::nullopt;
}

// The format tag of d if it is one of the activation layouts producers make (channel
// blocked by 16/8/4, channels-last), so that a broadcast operand can be given the same.
std::optional<memory::format_tag> activation_tag(const memory::desc& d) {
  using tag = memory::format_tag;
  const int r = d.data.ndims;
  std::vector<tag> tags;
  if (r == 3) tags = {tag::aBc16b, tag::aBc8b, tag::aBc4b, tag::acb};
  else if (r == 4) tags = {tag::aBcd16b, tag::aBcd8b, tag::aBcd4b, tag::acdb};
  else if (r == 5) tags = {tag::aBcde16b, tag::aBcde8b, tag::aBcde4b, tag::acdeb};
  memory::dims dims(d.data.dims, d.data.dims + r);
  for (tag t : tags)
    if (memory::desc(dims, d.data_type(), t) == d) return t;
  return std::nullopt;
}

// Row-major operands: drop the dims that are 1 in the output and merge neighbours that
// src1 broadcasts alike, e.g. [1,128,768] - [1,128,1] -> [128,768] - [128,1], so that
// oneDNN sees one of the broadcast forms it has a JIT kernel for.
void collapse(const Shape& y, const Shape& b, Shape& cy, Shape& cb) {
  cy.clear();
  cb.clear();
  int last = -1;  // 1: the previous kept dim is broadcast in src1
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 1) continue;
    int bc = b[i] == 1 ? 1 : 0;
    if (bc == last) {
      cy.back() *= y[i];
      cb.back() *= b[i];
    } else {
      cy.push_back(y[i]);
      cb.push_back(b[i]);
      last = bc;
    }
  }
  if (cy.empty()) cy = cb = {1};
}

class BinaryNode : public Node {
 public:
  BinaryNode(const ir::Node& n, BinarySpec spec) : Node(n), spec_(spec) {}
  const char* type() const override { return "Binary"; }
  NodeKind kind() const override { return NodeKind::Binary; }
  // oneDNN binary may write over src0 (the operand with the output's shape), except on a
  // layout with padded channels (see the top of this file)
  int inplace_input() const override {
    if (padded_) return -1;
    return spec_.swap ? 1 : 0;
  }

  std::vector<InputLayout> prepare() override {
    // same shapes, one blocked (e.g. a residual Add of a plain and a conv output): keep
    // the blocked one as src0 so the output stays blocked
    if ((spec_.commutative || spec_.is_sub) && !spec_.swap && inputs[0]->shape == inputs[1]->shape &&
        inputs[0]->is_plain() && !inputs[1]->is_plain()) {
      spec_.swap = true;
      spec_.negate = spec_.is_sub;
    }
    const size_t i0 = spec_.swap ? 1 : 0, i1 = 1 - i0;
    const Edge* e0 = inputs[i0];
    const Edge* e1 = inputs[i1];
    const Shape& ys = outputs[0]->shape;
    const size_t r = ys.size();
    const auto f32 = memory::data_type::f32;
    const Shape p1 = pad_rank(e1->shape, r);
    const bool same_shape = p1 == ys;

    dnnl::primitive_attr attr;
    const algorithm alg = spec_.negate ? algorithm::binary_add : spec_.alg;
    if (spec_.negate) attr.set_scales(DNNL_ARG_SRC_0, 0, {-1.0f});

    // Candidate (src0, src1, dst) descriptors with the layouts they need, best first;
    // the first with an optimised oneDNN kernel wins, else the first oneDNN accepts.
    struct Candidate {
      memory::desc md0, md1, mdd;
      InputLayout req0, req1;
      bool own_src1 = false;  // constant src1 reordered once into md1
    };
    std::vector<Candidate> cands;
    const memory::desc plain_y = *plain_desc(ys, DType::f32);
    const memory::desc plain_p1 = *plain_desc(p1, DType::f32);
    const bool src0_full_rank = e0->shape.size() == r;
    if (src0_full_rank && !e0->is_plain()) {
      // src0 stays in its (blocked / channels-last) layout, and so does the output
      const memory::desc md0 = e0->desc();
      if (same_shape) {
        if (e1->shape.size() == r) {
          if (e1->kind == Edge::Kind::constant)
            cands.push_back({md0, md0, md0, InputLayout::any(), InputLayout::any(), true});
          else
            cands.push_back({md0, md0, md0, InputLayout::any(), InputLayout::exact(md0)});
        }
      } else {
        if (e1->shape.size() == r && !e1->is_plain())
          cands.push_back({md0, e1->desc(), md0, InputLayout::any(), InputLayout::any()});
        if (auto t = activation_tag(md0)) {
          memory::desc md1(to_dims(p1), f32, *t);
          if (e1->kind == Edge::Kind::constant)
            cands.push_back({md0, md1, md0, InputLayout::any(), InputLayout::any(), true});
          else
            cands.push_back({md0, md1, md0, InputLayout::any(), InputLayout::exact(md1)});
        }
        cands.push_back({md0, plain_p1, md0, InputLayout::any(), InputLayout::plain()});
      }
    }
    // row-major: merged dims first, then the plain output shape
    {
      Shape cy, cb;
      collapse(ys, p1, cy, cb);
      auto c0 = plain_desc(cy, DType::f32), c1 = plain_desc(cb, DType::f32);
      if (c0 && c1) cands.push_back({*c0, *c1, *c0, InputLayout::plain(), InputLayout::plain()});
      cands.push_back({plain_y, plain_p1, plain_y, InputLayout::plain(), InputLayout::plain()});
    }

    std::optional<size_t> chosen;
    std::vector<std::optional<dnnl::binary::primitive_desc>> pds(cands.size());
    for (size_t k = 0; k < cands.size() && !chosen; ++k) {
      try {
        pds[k] = dnnl::binary::primitive_desc(dnnl::binary::desc(alg, cands[k].md0, cands[k].md1, cands[k].mdd),
                                              attr, cpu_engine());
        if (!is_ref_impl(pds[k]->impl_info_str())) chosen = k;
      } catch (const dnnl::error&) {
      }
    }
    for (size_t k = 0; k < cands.size() && !chosen; ++k)
      if (pds[k]) chosen = k;
    KILN_CHECK(chosen.has_value(), cat(source->describe(), ": oneDNN has no binary primitive for these operands"));
    const Candidate& c = cands[*chosen];
    pd_ = *pds[*chosen];
    prim_ = dnnl::binary(pd_);
    impl = pd_.impl_info_str();
    d_ = std::make_unique<const Descs>(Descs{c.md0, c.md1, c.mdd});
    padded_ = has_padding(d_->dst);
    if (c.own_src1) {
      src1_ = memory(d_->src1, cpu_engine());
      memory from(plain_p1, cpu_engine(), e1->data);
      dnnl::stream st(cpu_engine());
      dnnl::reorder(from, src1_).execute(st, from, src1_);
      st.wait();
    }
    Edge* out = outputs[0];
    // a row-major src0 (possibly with merged dims) gives a row-major output
    if (c.req0.kind == InputLayout::Kind::plain) out->blocked.reset();
    else out->set_layout(d_->dst);
    std::vector<InputLayout> req(2);
    req[i0] = c.req0;
    req[i1] = c.req1;
    return req;
  }

  void execute(dnnl::stream& stream) override {
    const size_t i0 = spec_.swap ? 1 : 0, i1 = 1 - i0;
    prim_.execute(stream, {{DNNL_ARG_SRC_0, memory(d_->src0, cpu_engine(), inputs[i0]->data)},
                           {DNNL_ARG_SRC_1, src1_ ? src1_ : memory(d_->src1, cpu_engine(), inputs[i1]->data)},
                           {DNNL_ARG_DST, memory(d_->dst, cpu_engine(), outputs[0]->data)}});
  }

 private:
  BinarySpec spec_;
  // The descriptors prepare() chose, on the heap: three are 2 KiB, and every bias Add of a
  // model is lowered to a BinaryNode that a FullyConnected absorbs before prepare() (for a model
  // whose shapes vary, on every new shape), where an object past malloc's small sizes cost time.
  struct Descs {
    memory::desc src0, src1, dst;
  };
  std::unique_ptr<const Descs> d_;
  bool padded_ = false;  // dst has padded dims: not in place
  memory src1_;  // a constant src1 in the layout the primitive wants
  dnnl::binary::primitive_desc pd_;
  dnnl::binary prim_;
};

}  // namespace

bool binary_supports(const ir::Node& n) { return binary_spec(n).has_value(); }

std::unique_ptr<Node> make_binary_node(const ir::Node& n) {
  auto spec = binary_spec(n);
  KILN_CHECK(spec.has_value(), cat(n.describe(), ": not a Binary op"));
  return std::make_unique<BinaryNode>(n, *spec);
}

}  // namespace kiln::cpu
