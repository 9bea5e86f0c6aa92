#include "snippets/generator.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/strings.hpp"
#include "ir/graph.hpp"
#include "snippets/lowered/pass/passes.hpp"
#include "snippets/pass/data_flow_passes.hpp"
#include "snippets/target_machine.hpp"

namespace kiln::snippets {

namespace {

const std::set<std::string>& onnx_ops() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Neg", "Abs", "Relu", "Sqrt",
                                            "Exp", "Sigmoid", "Tanh", "Erf", "Clip", "LeakyRelu", "Pow", "Floor",
                                            "Ceil", "Round"};
  return ops;
}

bool supported_power(double p) { return p == 0.5 || (p == std::floor(p) && std::fabs(p) <= 16); }

}  // namespace

bool is_supported(const ir::Node& n) {
  if (n.domain() == kSnippetsDomain) return n.op_type() == "Scalar" || n.op_type() == "FMA" || n.op_type() == "PowerStatic";
  if (!n.domain().empty() || !onnx_ops().count(n.op_type())) return false;
  for (size_t i = 0; i < n.num_outputs(); ++i)
    if (n.output(i)->type.dtype != DType::f32 && n.output(i)->type.dtype != DType::undefined) return false;
  if ((n.op_type() == "Max" || n.op_type() == "Min") && n.num_inputs() != 2) return false;
  if (n.op_type() == "Pow") {
    const ir::Value* e = n.input(1);
    if (!e || !e->is_constant() || e->constant().size() != 1 || e->constant().dtype() != DType::f32) return false;
    return supported_power(e->constant().data<float>()[0]);
  }
  if (n.op_type() == "Clip")
    for (size_t i = 1; i < n.num_inputs(); ++i)
      if (n.has_input(i) && (!n.input(i)->is_constant() || n.input(i)->constant().size() != 1)) return false;
  return true;
}

int64_t Schedule::rows() const {
  int64_t r = 1;
  for (auto d : outer) r *= d;
  return r;
}

Schedule make_schedule(const KernelShapes& shapes) {
  const Shape& out = shapes.output;
  const size_t rank = out.size();
  const size_t n_in = shapes.inputs.size();
  // Per kept dim (output dim > 1): does input i span it (true) or broadcast (false)?
  std::vector<int64_t> dims;
  std::vector<std::vector<bool>> full(n_in);
  for (size_t d = 0; d < rank; ++d) {
    KILN_CHECK(out[d] >= 1, cat("snippets: output shape ", shape_to_string(out), " has an empty dim"));
    if (out[d] == 1) continue;
    dims.push_back(out[d]);
    for (size_t i = 0; i < n_in; ++i) {
      const Shape& s = shapes.inputs[i];
      KILN_CHECK(s.size() <= rank, cat("snippets: input ", i, " shape ", shape_to_string(s), " has a higher rank than the output"));
      const size_t off = rank - s.size();
      const int64_t v = d < off ? 1 : s[d - off];
      KILN_CHECK(v == out[d] || v == 1, cat("snippets: input ", i, " shape ", shape_to_string(s),
                                              " does not broadcast to ", shape_to_string(out)));
      full[i].push_back(v == out[d]);
    }
  }
  for (size_t i = 0; i < n_in; ++i) {
    const Shape& s = shapes.inputs[i];
    KILN_CHECK(s.size() <= rank, cat("snippets: input ", i, " shape ", shape_to_string(s), " has a higher rank than the output"));
    for (size_t d = 0; d < s.size(); ++d) {
      const int64_t o = out[rank - s.size() + d];
      KILN_CHECK(s[d] == o || s[d] == 1, cat("snippets: input ", i, " shape ", shape_to_string(s),
                                               " does not broadcast to ", shape_to_string(out)));
    }
  }
  Schedule sc;
  sc.in_inner_broadcast.assign(n_in, false);
  sc.in_strides.assign(n_in, {});
  size_t k = dims.size();  // dims [k, size) form the inner block
  if (!dims.empty()) {
    k = dims.size() - 1;
    auto same = [&](size_t a, size_t b) {
      for (size_t i = 0; i < n_in; ++i)
        if (full[i][a] != full[i][b]) return false;
      return true;
    };
    while (k > 0 && same(k - 1, dims.size() - 1)) --k;
    for (size_t d = k; d < dims.size(); ++d) sc.inner *= dims[d];
    for (size_t i = 0; i < n_in; ++i) sc.in_inner_broadcast[i] = !full[i].back();
  }
  // Outer dims, adjacent ones merged when every input treats them alike.
  std::vector<int64_t> outer;
  std::vector<std::vector<bool>> ofull(n_in);
  for (size_t d = 0; d < k; ++d) {
    bool merge = !outer.empty();
    for (size_t i = 0; i < n_in && merge; ++i) merge = ofull[i].back() == full[i][d];
    if (merge) {
      outer.back() *= dims[d];
    } else {
      outer.push_back(dims[d]);
      for (size_t i = 0; i < n_in; ++i) ofull[i].push_back(full[i][d]);
    }
  }
  if (outer.empty()) {
    outer.push_back(1);
    for (size_t i = 0; i < n_in; ++i) ofull[i].push_back(false);
  }
  sc.outer = outer;
  for (size_t i = 0; i < n_in; ++i) {
    int64_t acc = sc.in_inner_broadcast[i] ? 1 : sc.inner;
    std::vector<int64_t> st(outer.size(), 0);
    for (size_t d = outer.size(); d-- > 0;) {
      if (ofull[i][d]) {
        st[d] = acc;
        acc *= outer[d];
      }
    }
    sc.in_strides[i] = st;
    const int64_t last = outer.back();
    sc.lir_in_shapes.push_back({ofull[i].back() ? last : 1, sc.in_inner_broadcast[i] ? 1 : sc.inner});
  }
  sc.lir_out_shape = {outer.back(), sc.inner};
  return sc;
}

Kernel::~Kernel() = default;

void Kernel::run(const std::vector<const float*>& ins, const std::vector<float*>& outs, int64_t begin, int64_t end) const {
  const Schedule& sc = schedule_;
  KILN_CHECK(ins.size() == sc.in_strides.size() && outs.size() == num_outputs_,
             cat("snippets kernel: expects ", sc.in_strides.size(), " inputs and ", num_outputs_, " outputs"));
  KILN_CHECK(begin >= 0 && begin <= end && end <= rows(), cat("snippets kernel: bad row range [", begin, ", ", end, ")"));
  const KernelFn fn = code_->fn();
  std::vector<const void*> ptrs(ins.size() + outs.size());
  const int64_t last = sc.outer.back();
  const size_t nd = sc.outer.size();
  int64_t r = begin;
  while (r < end) {
    const int64_t count = std::min(end - r, last - r % last);
    // Row index -> per-dim index -> each input's offset.
    for (size_t i = 0; i < ins.size(); ++i) {
      int64_t rem = r, off = 0;
      for (size_t d = nd; d-- > 0;) {
        off += (rem % sc.outer[d]) * sc.in_strides[i][d];
        rem /= sc.outer[d];
      }
      ptrs[i] = ins[i] + off;
    }
    for (size_t o = 0; o < outs.size(); ++o) ptrs[ins.size() + o] = outs[o] + r * sc.inner;
    fn(ptrs.data(), count);
    r += count;
  }
}

std::unique_ptr<Kernel> compile(const ir::Graph& body, const KernelShapes& shapes, const CompileOptions& options) {
  auto tm = cpu::x64::make_target_machine();
  tm->check_available();
  KILN_CHECK(shapes.inputs.size() == body.inputs().size(),
             cat("snippets: ", shapes.inputs.size(), " input shapes for a body with ", body.inputs().size(), " inputs"));
  KILN_CHECK(!body.outputs().empty(), "snippets: the body has no outputs");
  for (const ir::Node* n : body.nodes())
    KILN_CHECK(is_supported(*n), cat("snippets: ", n->describe(), " is not supported by the snippets generator"));
  for (const ir::Value* v : body.inputs())
    KILN_CHECK(v->type.dtype == DType::f32, cat("snippets: body input '", v->name(), "' is not f32"));

  // 1. Data-flow passes on a copy.
  auto g = body.clone();
  pass::convert_constants_to_scalars(*g);
  pass::convert_pow_to_power_static(*g);
  if (options.fuse_fma) pass::fuse_mul_add_to_fma(*g);
  for (const ir::Node* n : g->nodes())
    KILN_CHECK(tm->is_supported(n->op_type()), cat("snippets: ", n->describe(), " has no emitter on ", tm->name()));

  // 2. Linear IR over the 2-D schedule, 3. control-flow passes.
  auto kernel = std::unique_ptr<Kernel>(new Kernel());
  kernel->schedule_ = make_schedule(shapes);
  kernel->num_outputs_ = body.outputs().size();
  KILN_CHECK(static_cast<int>(body.inputs().size() + body.outputs().size()) <= tm->max_data_pointers(),
             cat("snippets: ", body.inputs().size() + body.outputs().size(), " data pointers, the kernel has ",
                 tm->max_data_pointers(), " general-purpose registers for them"));
  auto lir = lowered::LinearIR::from_graph(*g, kernel->schedule_.lir_in_shapes, kernel->schedule_.lir_out_shape);
  lowered::pass::PassPipeline::control_flow().run(*lir);

  // 4. Generator preparation and emission.
  lowered::pass::init_live_ranges(*lir);
  lowered::pass::assign_registers(*lir, tm->num_vector_regs());
  kernel->describe_ = lir->serialize_control_flow();
  kernel->code_ = tm->generate(*lir);
  return kernel;
}

}  // namespace kiln::snippets
