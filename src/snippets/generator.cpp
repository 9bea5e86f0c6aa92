#include "snippets/generator.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/address_memo.hpp"
#include "core/strings.hpp"
#include "ir/graph.hpp"
#include "ir/infer_util.hpp"
#include "snippets/lowered/pass/passes.hpp"
#include "snippets/pass/data_flow_passes.hpp"
#include "snippets/segfault_detector.hpp"
#include "snippets/target_machine.hpp"

namespace kiln::snippets {

namespace {

const std::set<std::string>& float_ops() {  // f32 in, f32 out
  static const std::set<std::string> ops = {
      "Add",  "Sub",       "Mul",         "Div",       "Max",      "Min",        "Neg",  "Abs",  "Relu", "Sqrt",
      "Exp",  "Sigmoid",   "Tanh",        "Erf",       "Clip",     "LeakyRelu",  "Pow",  "Floor", "Ceil", "Round",
      "Elu",  "Softplus",  "Mish",        "Gelu",      "HardSigmoid", "HardSwish", "Log", "Reciprocal",
      "PRelu"};
  return ops;
}
const std::set<std::string>& compare_ops() {  // f32 in, bool out
  static const std::set<std::string> ops = {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"};
  return ops;
}
const std::set<std::string>& logic_ops() {  // bool in, bool out
  static const std::set<std::string> ops = {"And", "Or", "Xor", "Not"};
  return ops;
}

// A kernel name usable in a file name.
std::string file_safe(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return r.empty() ? "kernel" : r;
}

// CompileOptions::segfault_detector, or KILN_SNIPPETS_SEGFAULT_DETECTOR=1 in the environment.
bool segfault_detector_on(const CompileOptions& options) {
  const char* env = std::getenv("KILN_SNIPPETS_SEGFAULT_DETECTOR");
  return options.segfault_detector || (env && std::string(env) == "1");
}

bool supported_power(double p) { return p == 0.5 || (p == std::floor(p) && std::fabs(p) <= 16); }

DType out_type(const ir::Node& n) { return n.num_outputs() ? n.output(0)->type.dtype : DType::undefined; }
DType in_type(const ir::Node& n, size_t i) { return n.has_input(i) ? n.input(i)->type.dtype : DType::undefined; }

// Values a kernel holds in its vector registers: f32, and bool / int32 / int64 as f32 values
// (narrow and unsigned integers would need their wrap-around, which a float does not do).
bool register_type(DType t) { return t == DType::f32 || t == DType::boolean || t == DType::i32 || t == DType::i64; }

}  // namespace

std::string isa_name(Isa isa) {
  switch (isa) {
    case Isa::Auto: return "auto";
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
  }
  return "?";
}

Isa parse_isa(const std::string& s) {
  if (s == "auto") return Isa::Auto;
  if (s == "avx512") return Isa::Avx512;
  if (s == "avx2") return Isa::Avx2;
  throw Error(cat("snippets: unknown instruction set '", s, "' (accepted: auto, avx512, avx2)"));
}

bool is_supported(const ir::Node& n) {
  if (n.domain() == kSnippetsDomain) return n.op_type() == "Scalar" || n.op_type() == "FMA" || n.op_type() == "PowerStatic";
  const std::string& op = n.op_type();
  if (n.domain() == "com.microsoft") return op == "Gelu" && out_type(n) == DType::f32;
  if (!n.domain().empty() || n.num_outputs() != 1) return false;
  const DType out = out_type(n);
  auto all_inputs = [&](DType t) {
    for (size_t i = 0; i < n.num_inputs(); ++i)
      if (!n.has_input(i) || in_type(n, i) != t) return false;
    return true;
  };
  if (compare_ops().count(op)) return n.num_inputs() == 2 && all_inputs(DType::f32) && out == DType::boolean;
  if (logic_ops().count(op)) return all_inputs(DType::boolean) && out == DType::boolean;
  if (op == "Where")
    return n.num_inputs() == 3 && in_type(n, 0) == DType::boolean && in_type(n, 1) == DType::f32 &&
           in_type(n, 2) == DType::f32 && out == DType::f32;
  if (op == "Cast") return n.num_inputs() == 1 && register_type(in_type(n, 0)) && register_type(out);
  // C fmod, exact for every pair (mod_emitter.cpp); ONNX requires fmod=1 for floats
  if (op == "Mod")
    return n.num_inputs() == 2 && all_inputs(DType::f32) && out == DType::f32 && n.attr_i("fmod", 0) == 1;
  if (op == "Transpose") {  // read as a layout of its input: the last dim must stay last
    const ir::Value* in = n.input(0);
    if (n.num_inputs() != 1 || in_type(n, 0) != DType::f32 || !in->type.shape.rank_known || in->type.shape.rank() == 0) return false;
    try {
      const auto perm = ir::transpose_perm(n, in->type.shape.rank());
      return perm.back() == static_cast<int64_t>(perm.size()) - 1;
    } catch (const Error&) {  // not a permutation
      return false;
    }
  }
  if (is_reduction_op(op)) return n.num_inputs() == 1 && in_type(n, 0) == DType::f32 && (out == DType::f32 || out == DType::undefined);
  if (!float_ops().count(op)) return false;
  if (out != DType::f32 && out != DType::undefined) return false;
  if ((op == "Max" || op == "Min") && n.num_inputs() != 2) return false;
  if (op == "Pow") {
    const ir::Value* e = n.input(1);
    if (!e || !e->is_constant() || e->constant().size() != 1 || e->constant().dtype() != DType::f32) return false;
    return supported_power(e->constant().data<float>()[0]);
  }
  if (op == "PRelu") return n.opset() == 0 || n.opset() >= 7;  // older opsets: a per-channel slope of another rank
  if (op == "Clip")
    for (size_t i = 1; i < n.num_inputs(); ++i)
      if (n.has_input(i) && (!n.input(i)->is_constant() || n.input(i)->constant().size() != 1)) return false;
  return true;
}

int64_t Schedule::rows() const {
  int64_t r = 1;
  for (auto d : outer) r *= d;
  return r;
}

Schedule make_schedule(const KernelShapes& shapes, int64_t inner_from, const std::vector<std::vector<int64_t>>& input_perms) {
  const Shape& out = shapes.output;
  const size_t rank = out.size();
  const size_t n_in = shapes.inputs.size();
  KILN_CHECK(inner_from < static_cast<int64_t>(rank), cat("snippets: inner block from dim ", inner_from, " of a rank-", rank, " output"));
  KILN_CHECK(input_perms.empty() || input_perms.size() == n_in,
             cat("snippets: ", input_perms.size(), " input layouts for ", n_in, " inputs"));
  for (size_t d = 0; d < rank; ++d)
    KILN_CHECK(out[d] >= 1, cat("snippets: output shape ", shape_to_string(out), " has an empty dim"));
  // Per input, per output dim: its step in the input's memory (elements; 0 where it broadcasts
  // or the dim is 1). An input with a layout (a Transpose fused into the kernel) is read in
  // the permuted order: logical dim k is memory dim perm[k].
  std::vector<std::vector<int64_t>> step(n_in, std::vector<int64_t>(rank, 0));
  for (size_t i = 0; i < n_in; ++i) {
    const Shape& mem = shapes.inputs[i];
    std::vector<int64_t> mstride(mem.size(), 1);
    for (size_t d = mem.size(); d-- > 1;) mstride[d - 1] = mstride[d] * mem[d];
    std::vector<size_t> perm(mem.size());
    for (size_t d = 0; d < perm.size(); ++d) perm[d] = d;
    const bool laid_out = !input_perms.empty() && !input_perms[i].empty();
    if (laid_out) {
      const auto& p = input_perms[i];
      std::vector<size_t> sorted(p.begin(), p.end());
      std::sort(sorted.begin(), sorted.end());
      KILN_CHECK(sorted == perm, cat("snippets: input ", i, " layout is not a permutation of its ", mem.size(), " dims"));
      perm.assign(p.begin(), p.end());
    }
    KILN_CHECK(mem.size() <= rank, cat("snippets: input ", i, " shape ", shape_to_string(mem), " has a higher rank than the output"));
    const size_t off = rank - mem.size();
    for (size_t k = 0; k < mem.size(); ++k) {
      const int64_t v = mem[perm[k]], o = out[off + k];
      KILN_CHECK(v == o || v == 1, cat("snippets: input ", i, " shape ", shape_to_string(mem), laid_out ? " (as laid out)" : "",
                                       " does not broadcast to ", shape_to_string(out)));
      step[i][off + k] = v == 1 ? 0 : mstride[perm[k]];
    }
  }
  // The dims larger than 1 (others change no offset).
  std::vector<int64_t> dims;
  std::vector<size_t> orig;
  size_t first_inner = 0;  // kept dims [first_inner, size) are at or after inner_from
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    if (static_cast<int64_t>(d) < inner_from) first_inner = dims.size() + 1;
    dims.push_back(out[d]);
    orig.push_back(d);
  }
  auto st = [&](size_t i, size_t kd) { return step[i][orig[kd]]; };
  // Kept dims a < b (adjacent) run as one for input i: both broadcast, or a's step spans b.
  auto joins = [&](size_t i, size_t a, size_t b) {
    return (st(i, a) == 0 && st(i, b) == 0) || (st(i, b) != 0 && st(i, a) == st(i, b) * dims[b]);
  };
  auto all_join = [&](size_t a, size_t b) {
    for (size_t i = 0; i < n_in; ++i)
      if (!joins(i, a, b)) return false;
    return true;
  };
  Schedule sc;
  sc.in_inner_broadcast.assign(n_in, false);
  sc.in_strides.assign(n_in, {});
  size_t k = dims.size();  // dims [k, size) form the inner block: unit steps (or none) for every input
  bool unit_last = true;  // every input contiguous (or broadcast) along the last kept dim
  for (size_t i = 0; i < n_in && !dims.empty(); ++i) unit_last &= st(i, dims.size() - 1) <= 1;
  KILN_CHECK(unit_last || inner_from < 0,
             cat("snippets: an input is not contiguous along the reduced dims of ", shape_to_string(out), " (its layout moves them)"));
  // Without that (a transposed input whose last dim is 1) the inner block is empty: one
  // element per row.
  if (!dims.empty() && unit_last) {
    const size_t last = dims.size() - 1;
    if (inner_from >= 0) {
      k = first_inner;
      for (size_t d = k; d + 1 < dims.size(); ++d)
        for (size_t i = 0; i < n_in; ++i)
          KILN_CHECK(joins(i, d, d + 1), cat("snippets: input ", i, " shape ", shape_to_string(shapes.inputs[i]),
                                             " broadcasts over part of the reduced dims of ", shape_to_string(out),
                                             " (from dim ", inner_from, ") or is not contiguous over them"));
    } else {
      k = last;
      while (k > 0 && all_join(k - 1, k)) --k;
    }
  }
  for (size_t d = k; d < dims.size(); ++d) sc.inner *= dims[d];
  if (k < dims.size())
    for (size_t i = 0; i < n_in; ++i) sc.in_inner_broadcast[i] = st(i, dims.size() - 1) == 0;
  // Outer dims, adjacent ones merged where every input steps through them as one.
  std::vector<int64_t> outer;
  std::vector<size_t> innermost;  // per merged outer dim: its innermost kept dim
  for (size_t d = 0; d < k; ++d) {
    if (!outer.empty() && all_join(innermost.back(), d)) {
      outer.back() *= dims[d];
      innermost.back() = d;
    } else {
      outer.push_back(dims[d]);
      innermost.push_back(d);
    }
  }
  sc.outer = outer.empty() ? std::vector<int64_t>{1} : outer;
  for (size_t i = 0; i < n_in; ++i) {
    std::vector<int64_t> s;
    for (size_t g = 0; g < innermost.size(); ++g) s.push_back(st(i, innermost[g]));
    if (s.empty()) s.push_back(0);
    sc.in_strides[i] = s;
    const int64_t row = s.back();
    sc.lir_in_shapes.push_back({row != 0 ? sc.outer.back() : 1, sc.in_inner_broadcast[i] ? 1 : sc.inner});
    sc.lir_in_row_strides.push_back(row);
  }
  sc.lir_out_shape = {sc.outer.back(), sc.inner};
  return sc;
}

Kernel::~Kernel() = default;

void Kernel::run(const std::vector<const float*>& ins, const std::vector<float*>& outs, int64_t begin, int64_t end) const {
  const Schedule& sc = schedule_;
  KILN_CHECK(ins.size() == sc.in_strides.size() && outs.size() == num_outputs_,
             cat("snippets kernel: expects ", sc.in_strides.size(), " inputs and ", num_outputs_, " outputs"));
  KILN_CHECK(begin >= 0 && begin <= end && end <= rows(), cat("snippets kernel: bad row range [", begin, ", ", end, ")"));
  const KernelFn fn = code_->fn();
  std::vector<const void*> ptrs(ins.size() + outs.size() + buffer_offsets_.size());
  if (scratch_size_ > 0) {  // the Buffers' rows: this thread's scratch, reused by every call
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < scratch_size_) scratch.resize(static_cast<size_t>(scratch_size_));
    for (size_t b = 0; b < buffer_offsets_.size(); ++b) ptrs[ins.size() + outs.size() + b] = scratch.data() + buffer_offsets_[b];
  }
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
    for (size_t o = 0; o < outs.size(); ++o)  // bf16 outputs: 2-byte elements
      ptrs[ins.size() + o] = reinterpret_cast<char*>(outs[o]) + r * sc.inner * output_bytes_;
    if (debug_) {
      set_active_kernel(debug_.get());
      fn(ptrs.data(), count);
      set_active_kernel(nullptr);
    } else {
      fn(ptrs.data(), count);
    }
    r += count;
  }
}

int64_t reduction_start(const ir::Node& n, const Shape& output) {
  const int64_t rank = static_cast<int64_t>(output.size());
  const ir::Value* in = n.input(0);
  KILN_CHECK(in && in->type.shape.is_static() && in->type.shape.to_shape() == output,
             cat("snippets: ", n.describe(), " reads a tensor of shape ", in ? in->type.shape.to_string() : "?",
                 "; the generator reduces only tensors of the kernel's output shape ", shape_to_string(output)));
  // opset 13 reduces one axis; earlier opsets the flattened dims from the axis on
  const bool one_axis = n.opset() == 0 || n.opset() >= 13;
  int64_t axis = n.has_attr("axis") ? n.attr_i("axis") : (one_axis ? -1 : 1);
  KILN_CHECK(axis >= -rank && axis < rank, cat("snippets: ", n.describe(), " axis ", axis, " is out of range for rank ", rank));
  if (axis < 0) axis += rank;
  if (one_axis)
    for (int64_t d = axis + 1; d < rank; ++d)
      KILN_CHECK(output[static_cast<size_t>(d)] == 1, cat("snippets: ", n.describe(), " reduces axis ", axis, ", not the last dim of ",
                                                          shape_to_string(output), " (the generator reduces along the inner dim)"));
  return axis;
}

int64_t reduced_from(const std::vector<const ir::Node*>& nodes, const Shape& output) {
  int64_t from = -1;
  for (const ir::Node* n : nodes) {
    if (!is_reduction_op(n->op_type())) continue;
    const int64_t axis = reduction_start(*n, output);
    KILN_CHECK(from < 0 || from == axis, cat("snippets: the body reduces from dim ", from, " and from dim ", axis, " (one inner block)"));
    from = axis;
  }
  return from;
}

namespace {

// The [rows, inner] views the Linear IR is built over, with the rows as 1 (one row per call) or
// 2 (several): the generated code takes the row count per call (the rows loop's work amount is
// a kernel argument), so it is the same for every row count above one.
struct LirView {
  std::vector<std::vector<int64_t>> in_shapes;
  std::vector<int64_t> out_shape;
};
LirView lir_view(const Schedule& sc) {
  const int64_t rows = std::min<int64_t>(sc.lir_out_shape.at(0), 2);
  LirView v;
  v.in_shapes = sc.lir_in_shapes;
  for (auto& s : v.in_shapes) s.at(0) = s.at(0) == 1 ? 1 : rows;
  v.out_shape = {rows, sc.lir_out_shape.at(1)};
  return v;
}

// The input transposes a body's Parameters absorb (pass::fuse_transposes_into_parameters on a copy).
std::vector<std::vector<int64_t>> input_perms(const ir::Graph& body) {
  auto g = body.clone();
  return pass::fuse_transposes_into_parameters(*g);
}

}  // namespace

std::unique_ptr<Kernel> compile(const ir::Graph& body, const KernelShapes& shapes, const CompileOptions& options) {
  KILN_CHECK(options.target, cat("snippets: no target machine to generate '", options.name, "' for (CompileOptions::target)"));
  const TargetMachine* tm = options.target.get();
  tm->check_available();
  KILN_CHECK(shapes.inputs.size() == body.inputs().size(),
             cat("snippets: ", shapes.inputs.size(), " input shapes for a body with ", body.inputs().size(), " inputs"));
  KILN_CHECK(!body.outputs().empty(), "snippets: the body has no outputs");
  for (const ir::Node* n : body.nodes())
    KILN_CHECK(is_supported(*n), cat("snippets: ", n->describe(), " is not supported by the snippets generator"));
  for (const ir::Value* v : body.inputs())
    KILN_CHECK(v->type.dtype == DType::f32, cat("snippets: body input '", v->name(), "' is not f32"));

  // 1. Data-flow passes on a copy.
  KILN_CHECK(!options.bf16_outputs || tm->supports_bf16_outputs(),
             cat("snippets: bf16 outputs need the AVX-512 target on a CPU with avx512_bf16 (", tm->name(), ")"));
  auto g = body.clone();
  const std::vector<std::vector<int64_t>> perms = pass::fuse_transposes_into_parameters(*g);
  pass::convert_constants_to_scalars(*g);
  pass::convert_pow_to_power_static(*g);
  if (options.fuse_fma) pass::fuse_mul_add_to_fma(*g);
  if (options.fuse_swish) pass::fuse_sigmoid_mul_to_swish(*g);
  for (const ir::Node* n : g->nodes())
    KILN_CHECK(is_reduction_op(n->op_type()) || tm->is_supported(n->op_type()),
               cat("snippets: ", n->describe(), " has no emitter on ", tm->name()));

  // 2. Linear IR over the 2-D schedule, 3. control-flow passes.
  auto kernel = std::unique_ptr<Kernel>(new Kernel());
  const std::vector<ir::Node*> nodes = body.nodes();
  kernel->schedule_ = make_schedule(shapes, reduced_from({nodes.begin(), nodes.end()}, shapes.output), perms);
  std::vector<std::vector<int64_t>> in_strides;  // the Parameters' memory strides over their [rows, inner] views
  for (size_t i = 0; i < shapes.inputs.size(); ++i)
    in_strides.push_back({kernel->schedule_.lir_in_row_strides[i], kernel->schedule_.in_inner_broadcast[i] ? 0 : 1});
  // The rows loop takes its count per call: the code is generated for one row or several, not
  // for this row count, so that kernels whose schedules differ only there share it (code_key)
  const LirView view = lir_view(kernel->schedule_);
  kernel->num_outputs_ = body.outputs().size();
  KILN_CHECK(static_cast<int>(body.inputs().size() + body.outputs().size()) <= tm->max_data_pointers(),
             cat("snippets: ", body.inputs().size() + body.outputs().size(), " data pointers, the kernel has ",
                 tm->max_data_pointers(), " general-purpose registers for them"));
  std::string dump_dir = options.dump_dir;
  if (dump_dir.empty())
    if (const char* env = std::getenv("KILN_SNIPPETS_DUMP_DIR")) dump_dir = env;
  // Unrolled inner loops need a register per copy of each value: the widest factor whose
  // registers fit wins.
  std::vector<int> factors = {options.unroll};
  if (options.unroll <= 0) factors = {4, 2, 1};
  std::unique_ptr<lowered::LinearIR> lir;
  for (size_t f = 0; f < factors.size(); ++f) {
    lir = lowered::LinearIR::from_graph(*g, view.in_shapes, view.out_shape, in_strides);
    lir->set_vector_length(tm->vector_length());
    lir->set_bf16_outputs(options.bf16_outputs);
    lir->set_unroll_factor(factors[f]);
    std::function<void(const std::string&, const lowered::LinearIR&)> dump;
    if (!dump_dir.empty()) {
      int step = 0;
      dump = [&, step](const std::string& pass, const lowered::LinearIR& ir) mutable {
        char num[16];
        std::snprintf(num, sizeof num, "%02d", ++step);
        const std::string path = dump_dir + "/" + file_safe(options.name) + "_u" + std::to_string(factors[f]) + "_" + num +
                                 "_" + pass + ".txt";
        std::ofstream out(path);
        KILN_CHECK(out.good(), cat("snippets: cannot write the Linear IR dump '", path, "'"));
        out << "# after " << pass << "\n# control flow\n" << ir.serialize_control_flow() << "\n# data flow\n"
            << ir.serialize_data_flow();
      };
    }
    lowered::pass::PassPipeline::control_flow(options.optimize_buffers).run(*lir, dump);

    // 4. Generator preparation and emission.
    lowered::pass::init_live_ranges(*lir);
    try {
      lowered::pass::assign_registers(*lir, tm->num_vector_regs());
      break;
    } catch (const Error&) {
      if (f + 1 < factors.size()) continue;  // fewer copies first; spills as the last resort
    }
    lowered::pass::insert_reg_spills(*lir, tm->num_vector_regs());
    lowered::pass::init_live_ranges(*lir);
    lowered::pass::assign_registers(*lir, tm->num_vector_regs());
  }
  kernel->describe_ = lir->serialize_control_flow();
  kernel->buffer_offsets_ = lir->buffer_offsets();
  kernel->scratch_size_ = lir->scratch_size();
  kernel->output_bytes_ = options.bf16_outputs ? 2 : 4;
  KILN_CHECK(static_cast<int>(body.inputs().size() + body.outputs().size() + kernel->buffer_offsets_.size()) <=
                 tm->max_data_pointers(),
             cat("snippets: ", body.inputs().size(), " inputs + ", body.outputs().size(), " outputs + ",
                 kernel->buffer_offsets_.size(), " buffers need more data pointers than the kernel's ",
                 tm->max_data_pointers(), " general-purpose registers for them"));
  if (segfault_detector_on(options)) {
    kernel->debug_ = std::make_shared<DebugState>();
    kernel->debug_->kernel = options.name;
    install_segfault_detector();
  }
  kernel->code_ = tm->generate(*lir, kernel->debug_.get());
  if (!dump_dir.empty()) {  // the machine code next to the Linear IR dumps
    const std::string path = dump_dir + "/" + file_safe(options.name) + ".bin";
    std::ofstream out(path, std::ios::binary);
    KILN_CHECK(out.good(), cat("snippets: cannot write the code dump '", path, "'"));
    out.write(reinterpret_cast<const char*>(kernel->code_->code()), static_cast<std::streamsize>(kernel->code_->size()));
  }
  kernel->isa_ = isa_name(tm->isa());
  return kernel;
}

namespace {

// The body: its ops, attributes, constants and wiring.
std::string graph_key(const ir::Graph& body) {
  std::ostringstream k;
  std::unordered_map<const ir::Value*, size_t> id;
  auto ref = [&](const ir::Value* v) -> std::string {
    if (!v) return "_";
    auto it = id.find(v);
    if (it != id.end()) return "%" + std::to_string(it->second);
    KILN_CHECK(v->is_constant(), cat("snippets: body value '", v->name(), "' is neither an input nor computed"));
    const Tensor& t = v->constant();
    const auto* p = static_cast<const unsigned char*>(t.raw());
    std::string hex;
    for (size_t i = 0; i < t.byte_size() && i < 64; ++i) hex += cat(static_cast<int>(p[i]), ".");
    if (t.byte_size() > 64) hex += std::to_string(std::hash<std::string>{}(std::string(reinterpret_cast<const char*>(p), t.byte_size())));
    return cat("const<", dtype_name(t.dtype()), shape_to_string(t.shape()), ":", hex, ">");
  };
  for (const ir::Value* v : body.inputs()) {
    k << "in " << dtype_name(v->type.dtype) << ";";
    id[v] = id.size();
  }
  for (const ir::Node* n : body.topo_order()) {
    k << n->domain() << "::" << n->op_type() << "(";
    for (size_t i = 0; i < n->num_inputs(); ++i) k << (i ? "," : "") << ref(n->input(i));
    k << ")";
    for (const auto& [name, a] : n->attrs) k << " " << name << "=" << a.to_string();
    for (size_t o = 0; o < n->num_outputs(); ++o) {
      k << " ->" << dtype_name(n->output(o)->type.dtype);
      id[n->output(o)] = id.size();
    }
    k << ";";
  }
  k << "out";
  for (const ir::Value* v : body.outputs()) k << " " << ref(v);
  return k.str();
}

// The body's key (graph_key) and the options that change the code.
// (Appended, not streamed: asked for each Subgraph of every new input shape's plan, 7% of an
// EfficientNet-B0 plan's instructions when it built an ostringstream.)
std::string body_key(const std::string& graph, const CompileOptions& options) {
  const std::string target = options.target ? options.target->name() : "none";
  std::string k;
  k.reserve(graph.size() + target.size() + 96);
  auto flag = [&](const char* name, bool on) { k.append(name).append(on ? "1" : "0"); };
  k.append(graph).append("|target ").append(target);
  flag(" fma ", options.fuse_fma);
  flag(" swish ", options.fuse_swish);
  k.append(" unroll ").append(std::to_string(options.unroll));
  flag(" detector ", segfault_detector_on(options));
  flag(" buffers ", options.optimize_buffers);
  flag(" bf16_out ", options.bf16_outputs);
  return k;
}

// What a kernel's machine code is made from besides the body: the schedule's [rows, inner]
// views (rows as one or several, lir_view), the inputs' row strides and inner broadcasts.
// (Appended, not streamed: asked for each Subgraph of every new input shape's plan, where an
// ostringstream's construction was a quarter of compile_cached's time.)
std::string code_key(const std::string& body, const Schedule& sc) {
  const LirView v = lir_view(sc);
  std::string k;
  k.reserve(body.size() + 24 + 48 * v.in_shapes.size());
  auto num = [&](int64_t x) { k += std::to_string(x); };
  k += body;
  k += "|view ";
  num(v.out_shape[0]);
  k += 'x';
  num(v.out_shape[1]);
  for (size_t i = 0; i < v.in_shapes.size(); ++i) {
    k += " in";
    num(static_cast<int64_t>(i));
    k += ' ';
    num(v.in_shapes[i][0]);
    k += 'x';
    num(v.in_shapes[i][1]);
    k += " row ";
    num(sc.lir_in_row_strides[i]);
    if (sc.in_inner_broadcast[i]) k += " bcast";
  }
  return k;
}

// The per-shape cache's key: the body's and the shapes.
std::string shapes_key(const std::string& body, const KernelShapes& shapes) {
  std::string k;  // (appended, not streamed: asked for each Subgraph of every new input shape)
  k.reserve(body.size() + 24 * (shapes.inputs.size() + 1) + 8);
  k += body;
  k += "|shapes";
  auto put = [&](const Shape& s) {
    k += " [";
    for (size_t i = 0; i < s.size(); ++i) {
      if (i) k += ',';
      k += std::to_string(s[i]);
    }
    k += ']';
  };
  for (const Shape& s : shapes.inputs) put(s);
  k += " ->";
  put(shapes.output);
  return k;
}

}  // namespace

std::string kernel_cache_key(const ir::Graph& body, const KernelShapes& shapes, const CompileOptions& options) {
  return shapes_key(body_key(graph_key(body), options), shapes);
}

namespace {

// graph_key of a body held by a shared_ptr, kept while the body lives (AddressMemo): a body
// does not change once made (ir::Graph::clone shares it between a graph and its copies), and
// every new input shape's plan asks again for each of its Subgraphs (2.5% of a
// mobilenet_v3_small plan).
std::shared_ptr<const std::string> shared_graph_key(const std::shared_ptr<const ir::Graph>& body) {
  static std::mutex mu;
  static AddressMemo<const ir::Graph, std::shared_ptr<const std::string>> keys;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (const std::shared_ptr<const std::string>* key = keys.find(body)) return *key;
  }
  auto key = std::make_shared<const std::string>(graph_key(*body));
  std::lock_guard<std::mutex> lock(mu);
  keys.insert(body, key);
  return key;
}

}  // namespace

namespace {

struct KernelCache {
  std::mutex mu;
  std::unordered_map<std::string, std::weak_ptr<const Kernel>> kernels;
  std::unordered_map<std::string, std::weak_ptr<const Kernel>> by_code;  // code_key -> a kernel with that code
  size_t hits = 0, misses = 0, code_shared = 0;
  // Entries a map may reach before the next scan for dead ones: twice the live ones after the
  // last scan (at least 64), so that a model holding hundreds of kernels (a Subgraph per block,
  // a plan per input shape) scans once per doubling, not on every new kernel.
  size_t prune_kernels_at = 64, prune_code_at = 64;
};

KernelCache& kernel_cache() {
  static KernelCache c;
  return c;
}

}  // namespace

// compile_cached with the body's graph_key given (Kernel's friend: a kernel sharing another's code)
std::shared_ptr<const Kernel> compile_cached_as(const ir::Graph& body, const std::string& gkey, const KernelShapes& shapes,
                                                const CompileOptions& options);

std::shared_ptr<const Kernel> compile_cached(const std::shared_ptr<const ir::Graph>& body, const KernelShapes& shapes,
                                             const CompileOptions& options) {
  KILN_CHECK(body, "snippets::compile_cached: no body");
  return compile_cached_as(*body, *shared_graph_key(body), shapes, options);
}

std::shared_ptr<const Kernel> compile_cached(const ir::Graph& body, const KernelShapes& shapes, const CompileOptions& options) {
  return compile_cached_as(body, graph_key(body), shapes, options);
}

std::shared_ptr<const Kernel> compile_cached_as(const ir::Graph& body, const std::string& gkey, const KernelShapes& shapes,
                                                const CompileOptions& options) {
  const std::string bkey = body_key(gkey, options);
  const std::string key = shapes_key(bkey, shapes);
  KernelCache& c = kernel_cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.kernels.find(key);
    if (it != c.kernels.end())
      if (auto k = it->second.lock()) {
        ++c.hits;
        return k;
      }
  }
  // Another shape's kernel whose code fits: this shape's schedule, that machine code. (A body or
  // shapes the generator refuses get compile()'s error below.)
  std::string ckey;
  std::shared_ptr<Kernel> shared;
  try {
    const std::vector<ir::Node*> all = body.nodes();
    const std::vector<const ir::Node*> nodes(all.begin(), all.end());
    Schedule sc = make_schedule(shapes, reduced_from(nodes, shapes.output), input_perms(body));
    ckey = code_key(bkey, sc);
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.by_code.find(ckey);
    if (it != c.by_code.end())
      if (auto other = it->second.lock()) {  // its code, buffers and scratch (shared_ptrs); this schedule
        shared = std::shared_ptr<Kernel>(new Kernel(*other));
        shared->schedule_ = std::move(sc);
      }
  } catch (const Error&) {
    ckey.clear();
  }
  std::shared_ptr<const Kernel> k = shared;
  if (!k) k = compile(body, shapes, options);  // outside the lock: compiling takes a while
  std::lock_guard<std::mutex> lock(c.mu);
  auto& slot = c.kernels[key];
  if (auto other = slot.lock()) {  // another thread made it meanwhile
    ++c.hits;
    return other;
  }
  ++c.misses;
  if (shared) ++c.code_shared;
  slot = k;
  if (!ckey.empty() && !shared) c.by_code[ckey] = k;
  // forget kernels nobody holds any more (a long-running process compiles many models)
  auto prune = [](auto& m, size_t& at) {
    if (m.size() <= at) return;
    for (auto it = m.begin(); it != m.end();) it = it->second.expired() ? m.erase(it) : std::next(it);
    at = std::max<size_t>(64, 2 * m.size());
  };
  prune(c.kernels, c.prune_kernels_at);
  prune(c.by_code, c.prune_code_at);
  return k;
}

KernelCacheStats kernel_cache_stats() {
  KernelCache& c = kernel_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  KernelCacheStats s;
  s.hits = c.hits;
  s.misses = c.misses;
  s.code_shared = c.code_shared;
  for (auto it = c.kernels.begin(); it != c.kernels.end();) {
    if (it->second.expired()) {
      it = c.kernels.erase(it);
    } else {
      ++s.live;
      ++it;
    }
  }
  return s;
}

}  // namespace kiln::snippets
