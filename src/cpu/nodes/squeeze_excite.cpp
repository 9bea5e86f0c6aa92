// SqueezeExcite: the kiln SqueezeExcite op (FuseSqueezeExcite's squeeze-and-excitation block) on
// kiln's kernel (squeeze_excite_f32.hpp), in the input's layout where it is channels-last,
// channel blocks of 8 or 16, or plain (any other: plain, through a Reorder), the output in the
// same layout, written over the input where the memory plan allows (the kernel has read all of
// an image's pixels before it scales them). Every instruction set runs it; nothing is made per
// shape but the geometry.
#include <omp.h>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/squeeze_excite_f32.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

class SqueezeExciteNode : public Node {
 public:
  explicit SqueezeExciteNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "SqueezeExcite"; }
  NodeKind kind() const override { return NodeKind::SqueezeExcite; }
  int inplace_input() const override { return 0; }
  size_t scratch_bytes() const override { return squeeze_excite_f32::scratch_floats(g_, threads_) * sizeof(float); }

  std::vector<InputLayout> prepare() override {
    const Shape& x = inputs[0]->shape;
    KILN_CHECK(x.size() == 4, cat(source->describe(), ": SqueezeExcite takes [N, C, H, W], got ", shape_to_string(x)));
    threads_ = omp_get_max_threads();
    squeeze_excite_f32::Geometry& g = g_;
    g.batch = x[0], g.channels = x[1], g.height = x[2], g.width = x[3];
    g.reduced = inputs[1]->shape[0];
    g.swish = source->attr_s("activation", "Relu") == "Swish";
    g.hard_gate = source->attr_s("gate", "Sigmoid") == "HardSigmoid";
    g.gate_alpha = source->attr_f("gate_alpha", 0.2f);
    g.gate_beta = source->attr_f("gate_beta", 0.5f);
    // the input's layout when the kernel takes it, else plain
    InputLayout want = InputLayout::any();
    memory::desc layout = *plain_desc(x, DType::f32);
    g.lanes = 1, g.runs = x[1];  // plain: a run of one lane per channel
    if (!inputs[0]->is_plain()) {
      want = InputLayout::plain();
      const memory::desc d = inputs[0]->desc();
      for (const auto& [t, lanes] : {std::pair{tag::nhwc, x[1]}, std::pair{tag::nChw16c, int64_t{16}}, std::pair{tag::nChw8c, int64_t{8}}}) {
        if (d != memory::desc(to_dims(x), memory::data_type::f32, t)) continue;
        g.lanes = lanes;
        g.runs = (x[1] + lanes - 1) / lanes;
        layout = d;
        want = InputLayout::any();
        break;
      }
    }
    // oneDNN's strides are the outer dims': dim 1's steps from one block of channels to the next
    const auto& st = layout.data.format_desc.blocking.strides;
    g.n_stride = st[0], g.run_stride = g.runs > 1 ? st[1] : 0, g.h_stride = st[2], g.w_stride = st[3];
    outputs[0]->set_layout(layout);
    impl = squeeze_excite_f32::impl_name();
    return {want, InputLayout::any(), InputLayout::any(), InputLayout::any(), InputLayout::any()};
  }

  void execute(dnnl::stream&) override {
    auto f = [&](int i) { return static_cast<const float*>(inputs[static_cast<size_t>(i)]->data); };
    squeeze_excite_f32::run(g_, threads_, f(1), f(2), f(3), f(4), f(0), static_cast<float*>(outputs[0]->data),
                            static_cast<float*>(scratch));
  }

 private:
  squeeze_excite_f32::Geometry g_;
  int threads_ = 1;
};

}  // namespace

bool squeeze_excite_supports(const ir::Node& n) {
  if (n.domain() != "kiln" || n.op_type() != "SqueezeExcite" || n.num_inputs() != 5 || n.num_outputs() != 1) return false;
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static() || x->type.shape.rank() != 4) return false;
  const Shape xs = x->type.shape.to_shape();
  if (shape_size(xs) == 0) return false;
  for (size_t i = 1; i < 5; ++i) {
    const ir::Value* v = n.input(i);
    if (!v || !v->is_constant() || v->type.dtype != DType::f32) return false;
  }
  const Shape w1 = n.input(1)->constant().shape(), w2 = n.input(3)->constant().shape();
  if (w1.size() != 2 || w2.size() != 2 || w1[1] != xs[1] || w2[0] != xs[1] || w2[1] != w1[0]) return false;
  return n.input(2)->constant().size() == w1[0] && n.input(4)->constant().size() == xs[1];
}

std::unique_ptr<Node> make_squeeze_excite_node(const ir::Node& n) { return std::make_unique<SqueezeExciteNode>(n); }

}  // namespace kiln::cpu
