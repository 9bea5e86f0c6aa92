// Recurrent ops: RNN, GRU, LSTM (ONNX opsets 7..17, layout attribute from 14).
//
// One shared driver handles the parts common to the three ops (input layout, directions,
// sequence_lens, initial states, activations, clip); each op supplies its cell step.
// Computation happens in float (double for f64 inputs).
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

namespace {

enum class RnnKind { rnn, gru, lstm };

int num_gates(RnnKind k) { return k == RnnKind::rnn ? 1 : k == RnnKind::gru ? 3 : 4; }
size_t num_activations(RnnKind k) { return k == RnnKind::rnn ? 1 : k == RnnKind::gru ? 2 : 3; }
const char* kind_name(RnnKind k) { return k == RnnKind::rnn ? "RNN" : k == RnnKind::gru ? "GRU" : "LSTM"; }

std::vector<std::string> default_activations(RnnKind k) {
  switch (k) {
    case RnnKind::rnn: return {"Tanh"};
    case RnnKind::gru: return {"Sigmoid", "Tanh"};
    case RnnKind::lstm: return {"Sigmoid", "Tanh", "Tanh"};
  }
  return {};
}

// ---- activation functions ----

enum class ActKind { relu, tanh, sigmoid, affine, leaky_relu, thresholded_relu, scaled_tanh, hard_sigmoid, elu,
                     softsign, softplus };

struct ActInfo {
  const char* name;
  ActKind kind;
  int num_alpha, num_beta;
  float def_alpha, def_beta;
};

const ActInfo kActs[] = {
    {"relu", ActKind::relu, 0, 0, 0.f, 0.f},
    {"tanh", ActKind::tanh, 0, 0, 0.f, 0.f},
    {"sigmoid", ActKind::sigmoid, 0, 0, 0.f, 0.f},
    {"affine", ActKind::affine, 1, 1, 1.f, 0.f},
    {"leakyrelu", ActKind::leaky_relu, 1, 0, 0.01f, 0.f},
    {"thresholdedrelu", ActKind::thresholded_relu, 1, 0, 1.f, 0.f},
    {"scaledtanh", ActKind::scaled_tanh, 1, 1, 1.f, 1.f},
    {"hardsigmoid", ActKind::hard_sigmoid, 1, 1, 0.2f, 0.5f},
    {"elu", ActKind::elu, 1, 0, 1.f, 0.f},
    {"softsign", ActKind::softsign, 0, 0, 0.f, 0.f},
    {"softplus", ActKind::softplus, 0, 0, 0.f, 0.f},
};

const ActInfo* find_act(const std::string& name) {
  std::string low;
  for (char c : name) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& a : kActs)
    if (low == a.name) return &a;
  return nullptr;
}

struct Activation {
  ActKind kind = ActKind::tanh;
  double alpha = 0, beta = 0;

  template <typename C>
  C operator()(C x) const {
    switch (kind) {
      case ActKind::relu: return x > 0 ? x : C(0);
      case ActKind::tanh: return std::tanh(x);
      case ActKind::sigmoid: return C(1) / (C(1) + std::exp(-x));
      case ActKind::affine: return C(alpha) * x + C(beta);
      case ActKind::leaky_relu: return x >= 0 ? x : C(alpha) * x;
      case ActKind::thresholded_relu: return x > C(alpha) ? x : C(0);
      case ActKind::scaled_tanh: return C(alpha) * std::tanh(C(beta) * x);
      case ActKind::hard_sigmoid: return std::clamp(C(alpha) * x + C(beta), C(0), C(1));
      case ActKind::elu: return x >= 0 ? x : C(alpha) * (std::exp(x) - C(1));
      case ActKind::softsign: return x / (C(1) + std::abs(x));
      case ActKind::softplus: return std::log1p(std::exp(-std::abs(x))) + std::max(x, C(0));
    }
    return x;
  }
};

int64_t num_directions(const ir::Node& n) {
  std::string d = n.attr_s("direction", "forward");
  return d == "bidirectional" ? 2 : 1;
}

// Activations per direction: result[d * num_act + k].
std::vector<Activation> parse_activations(const ir::Node& n, RnnKind kind) {
  const size_t na = num_activations(kind);
  const size_t nd = static_cast<size_t>(num_directions(n));
  std::vector<std::string> names = n.has_attr("activations") ? n.attr_strings("activations") : default_activations(kind);
  if (names.size() == na && nd == 2) {
    auto copy = names;
    names.insert(names.end(), copy.begin(), copy.end());
  }
  KILN_CHECK(names.size() == na * nd,
             cat(n.describe(), ": attribute 'activations' must list ", na * nd, " functions (", na,
                 " per direction), got ", names.size()));
  std::vector<float> alphas = n.attr_floats("activation_alpha", {});
  std::vector<float> betas = n.attr_floats("activation_beta", {});
  size_t ai = 0, bi = 0;
  std::vector<Activation> out;
  for (const auto& name : names) {
    const ActInfo* info = find_act(name);
    KILN_CHECK(info, cat(n.describe(), ": unsupported activation function '", name, "'"));
    Activation a;
    a.kind = info->kind;
    a.alpha = info->def_alpha;
    a.beta = info->def_beta;
    if (info->num_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (info->num_beta && bi < betas.size()) a.beta = betas[bi++];
    out.push_back(a);
  }
  return out;
}

void validate_rnn(const ir::Node& n, RnnKind kind) {
  std::string d = n.attr_s("direction", "forward");
  KILN_CHECK(d == "forward" || d == "reverse" || d == "bidirectional",
             cat(n.describe(), ": attribute 'direction' must be forward, reverse or bidirectional, got '", d, "'"));
  int64_t layout = n.attr_i("layout", 0);
  KILN_CHECK(layout == 0 || layout == 1, cat(n.describe(), ": attribute 'layout' must be 0 or 1, got ", layout));
  if (n.has_attr("hidden_size"))
    KILN_CHECK(n.attr_i("hidden_size") > 0,
               cat(n.describe(), ": attribute 'hidden_size' must be positive, got ", n.attr_i("hidden_size")));
  if (n.has_attr("clip"))
    KILN_CHECK(n.attr_f("clip") > 0, cat(n.describe(), ": attribute 'clip' must be positive"));
  parse_activations(n, kind);  // throws on a bad list
}

void infer_rnn(ir::InferContext& ctx, RnnKind kind) {
  const ir::Node& n = ctx.node();
  const DType dt = ctx.input_dtype(0);
  const int64_t layout = n.attr_i("layout", 0);
  const int64_t nd = num_directions(n);
  const ir::PartialShape& xs = ctx.input_shape(0);
  ir::Dim seq, batch, hidden;
  if (xs.rank_known) {
    if (xs.rank() != 3) throw ctx.error("input X must have rank 3, got ", xs.to_string());
    seq = layout == 0 ? xs.dims[0] : xs.dims[1];
    batch = layout == 0 ? xs.dims[1] : xs.dims[0];
  }
  if (n.has_attr("hidden_size")) {
    hidden = n.attr_i("hidden_size");
  } else {
    const ir::PartialShape& rs = ctx.input_shape(2);
    if (rs.rank_known && rs.rank() == 3) hidden = rs.dims[2];
  }
  (void)kind;
  ctx.set_output(0, dt, layout == 0 ? ir::PartialShape({seq, nd, batch, hidden})
                                    : ir::PartialShape({batch, seq, nd, hidden}));
  ir::PartialShape hs = layout == 0 ? ir::PartialShape({nd, batch, hidden}) : ir::PartialShape({batch, nd, hidden});
  ctx.set_output(1, dt, hs);
  if (kind == RnnKind::lstm) ctx.set_output(2, dt, hs);
}

template <typename C>
std::vector<C> load(const Tensor& t) {
  std::vector<C> v(static_cast<size_t>(t.size()));
  dispatch_float(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    if constexpr (std::is_same_v<T, double>) {
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<C>(p[i]);
    } else {
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<C>(static_cast<float>(p[i]));
    }
  }, "recurrent op");
  return v;
}

template <typename T, typename C>
void store(Tensor& t, const std::vector<C>& v) {
  T* p = t.data<T>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
}

void check_shape(const RunContext& ctx, const Tensor& t, const char* name, const Shape& want) {
  if (t.shape() != want)
    throw ctx.error("input ", name, " must have shape ", shape_to_string(want), ", got ", shape_to_string(t.shape()));
}

template <typename T>
void run_rnn_typed(RunContext& ctx, RnnKind kind) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const ir::Node& n = ctx.node();
  const Tensor& X = ctx.input(0);
  const Tensor& Wt = ctx.input(1);
  const Tensor& Rt = ctx.input(2);
  const int64_t layout = n.attr_i("layout", 0);
  const std::string direction = n.attr_s("direction", "forward");
  const int64_t D = num_directions(n);
  const int64_t G = num_gates(kind);
  if (X.rank() != 3) throw ctx.error("input X must have rank 3, got ", shape_to_string(X.shape()));
  if (Wt.rank() != 3 || Rt.rank() != 3)
    throw ctx.error("inputs W and R must have rank 3, got ", shape_to_string(Wt.shape()), " and ",
                    shape_to_string(Rt.shape()));
  const int64_t S = layout == 0 ? X.shape()[0] : X.shape()[1];
  const int64_t B = layout == 0 ? X.shape()[1] : X.shape()[0];
  const int64_t I = X.shape()[2];
  const int64_t H = n.has_attr("hidden_size") ? n.attr_i("hidden_size") : Rt.shape()[2];
  check_shape(ctx, Wt, "W", {D, G * H, I});
  check_shape(ctx, Rt, "R", {D, G * H, H});
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && i != 4 && ctx.input(i).dtype() != X.dtype())
      throw ctx.error("input ", i, " has element type ", dtype_name(ctx.input(i).dtype()), " but X has ",
                      dtype_name(X.dtype()));

  const std::vector<C> x = load<C>(X), w = load<C>(Wt), r = load<C>(Rt);
  std::vector<C> bias(static_cast<size_t>(D * 2 * G * H), C(0));
  if (ctx.has_input(3)) {
    check_shape(ctx, ctx.input(3), "B", {D, 2 * G * H});
    bias = load<C>(ctx.input(3));
  }
  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (ctx.has_input(4)) {
    const Tensor& sl = ctx.input(4);
    if (!is_integral(sl.dtype())) throw ctx.error("input sequence_lens must be an integer tensor");
    check_shape(ctx, sl, "sequence_lens", {B});
    lens = sl.to_i64();
    for (int64_t l : lens)
      if (l < 0 || l > S) throw ctx.error("sequence_lens value ", l, " is outside [0, ", S, "]");
  }
  const Shape state_shape = layout == 0 ? Shape{D, B, H} : Shape{B, D, H};
  auto state_index = [&](int64_t d, int64_t b) { return layout == 0 ? (d * B + b) * H : (b * D + d) * H; };
  std::vector<C> h0(static_cast<size_t>(D * B * H), C(0)), c0 = h0;
  if (ctx.has_input(5)) {
    check_shape(ctx, ctx.input(5), "initial_h", state_shape);
    h0 = load<C>(ctx.input(5));
  }
  std::vector<C> peep(static_cast<size_t>(D * 3 * H), C(0));
  if (kind == RnnKind::lstm) {
    if (ctx.has_input(6)) {
      check_shape(ctx, ctx.input(6), "initial_c", state_shape);
      c0 = load<C>(ctx.input(6));
    }
    if (ctx.has_input(7)) {
      check_shape(ctx, ctx.input(7), "P", {D, 3 * H});
      peep = load<C>(ctx.input(7));
    }
  }
  const std::vector<Activation> acts = parse_activations(n, kind);
  const size_t na = num_activations(kind);
  const bool has_clip = n.has_attr("clip");
  const C clip = has_clip ? C(n.attr_f("clip")) : C(0);
  const bool lbr = kind == RnnKind::gru && n.attr_i("linear_before_reset", 0) != 0;
  const bool input_forget = kind == RnnKind::lstm && n.attr_i("input_forget", 0) != 0;
  auto clipv = [&](C v) { return has_clip ? std::clamp(v, -clip, clip) : v; };

  std::vector<C> y(static_cast<size_t>(S * D * B * H), C(0));
  std::vector<C> yh(static_cast<size_t>(D * B * H), C(0)), yc = yh;
  auto x_index = [&](int64_t t, int64_t b) { return layout == 0 ? (t * B + b) * I : (b * S + t) * I; };
  auto y_index = [&](int64_t t, int64_t d, int64_t b) {
    return layout == 0 ? ((t * D + d) * B + b) * H : ((b * S + t) * D + d) * H;
  };

  std::vector<C> gates(static_cast<size_t>(G * H)), hprev(static_cast<size_t>(H)), cprev(static_cast<size_t>(H));
  std::vector<C> hnew(static_cast<size_t>(H)), rh(static_cast<size_t>(H));
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || (direction == "bidirectional" && d == 1);
    const C* W = w.data() + d * G * H * I;
    const C* R = r.data() + d * G * H * H;
    const C* Wb = bias.data() + d * 2 * G * H;
    const C* Rb = Wb + G * H;
    const C* P = peep.data() + d * 3 * H;
    const Activation* act = acts.data() + d * na;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t si = state_index(d, b);
      std::copy_n(h0.begin() + si, H, hprev.begin());
      std::copy_n(c0.begin() + si, H, cprev.begin());
      const int64_t len = lens[static_cast<size_t>(b)];
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        const C* xt = x.data() + x_index(t, b);
        // gates = W x + Wb (+ R h + Rb, except the GRU candidate gate which is handled below)
        for (int64_t g = 0; g < G * H; ++g) {
          C acc = Wb[g];
          const C* wr = W + g * I;
          for (int64_t i = 0; i < I; ++i) acc += wr[i] * xt[i];
          const bool gru_candidate = kind == RnnKind::gru && g >= 2 * H;
          if (!gru_candidate) {
            acc += Rb[g];
            const C* rr = R + g * H;
            for (int64_t j = 0; j < H; ++j) acc += rr[j] * hprev[j];
          }
          gates[g] = acc;
        }
        if (kind == RnnKind::rnn) {
          for (int64_t j = 0; j < H; ++j) hnew[j] = act[0](clipv(gates[j]));
        } else if (kind == RnnKind::gru) {
          C* z = gates.data();
          C* rg = gates.data() + H;
          C* hc = gates.data() + 2 * H;
          for (int64_t j = 0; j < H; ++j) {
            z[j] = act[0](clipv(z[j]));
            rg[j] = act[0](clipv(rg[j]));
          }
          const C* Rh = R + 2 * H * H;
          const C* Rbh = Rb + 2 * H;
          if (lbr) {
            for (int64_t j = 0; j < H; ++j) {
              C acc = Rbh[j];
              for (int64_t k = 0; k < H; ++k) acc += Rh[j * H + k] * hprev[k];
              hc[j] += rg[j] * acc;
            }
          } else {
            for (int64_t k = 0; k < H; ++k) rh[k] = rg[k] * hprev[k];
            for (int64_t j = 0; j < H; ++j) {
              C acc = Rbh[j];
              for (int64_t k = 0; k < H; ++k) acc += Rh[j * H + k] * rh[k];
              hc[j] += acc;
            }
          }
          for (int64_t j = 0; j < H; ++j) {
            C hh = act[1](clipv(hc[j]));
            hnew[j] = (C(1) - z[j]) * hh + z[j] * hprev[j];
          }
        } else {
          // LSTM gate order i, o, f, c; peepholes P = [Pi, Po, Pf].
          const C* gi = gates.data();
          const C* go = gates.data() + H;
          const C* gf = gates.data() + 2 * H;
          const C* gc = gates.data() + 3 * H;
          for (int64_t j = 0; j < H; ++j) {
            C i = act[0](clipv(gi[j] + P[j] * cprev[j]));
            C f = input_forget ? C(1) - i : act[0](clipv(gf[j] + P[2 * H + j] * cprev[j]));
            C c = act[1](clipv(gc[j]));
            C cn = f * cprev[j] + i * c;
            C o = act[0](clipv(go[j] + P[H + j] * cn));
            hnew[j] = o * act[2](cn);
            cprev[j] = cn;
          }
        }
        std::copy(hnew.begin(), hnew.end(), hprev.begin());
        std::copy(hnew.begin(), hnew.end(), y.begin() + y_index(t, d, b));
      }
      std::copy(hprev.begin(), hprev.end(), yh.begin() + si);
      std::copy(cprev.begin(), cprev.end(), yc.begin() + si);
    }
  }

  const DType dt = X.dtype();
  if (ctx.num_outputs() > 0) {
    Tensor& Y = ctx.allocate_output(0, dt, layout == 0 ? Shape{S, D, B, H} : Shape{B, S, D, H});
    store<T>(Y, y);
  }
  if (ctx.num_outputs() > 1) store<T>(ctx.allocate_output(1, dt, state_shape), yh);
  if (ctx.num_outputs() > 2) store<T>(ctx.allocate_output(2, dt, state_shape), yc);
}

void add_rnn_op(ir::OpRegistry& reg, RnnKind kind, int since) {
  ir::OpSchema s;
  s.name = kind_name(kind);
  s.since_version = since;
  s.min_inputs = 3;
  s.max_inputs = kind == RnnKind::lstm ? 8 : 6;
  s.min_outputs = 0;
  s.max_outputs = kind == RnnKind::lstm ? 3 : 2;
  s.attrs = {{"activation_alpha", ir::AttrType::floats},
             {"activation_beta", ir::AttrType::floats},
             {"activations", ir::AttrType::strings},
             {"clip", ir::AttrType::f},
             {"direction", ir::AttrType::s},
             {"hidden_size", ir::AttrType::i},
             {"layout", ir::AttrType::i},
             {"output_sequence", ir::AttrType::i}};  // opset < 7 only; ignored
  if (kind == RnnKind::gru) s.attrs.push_back({"linear_before_reset", ir::AttrType::i});
  if (kind == RnnKind::lstm) s.attrs.push_back({"input_forget", ir::AttrType::i});
  s.validate = [kind](const ir::Node& n) { validate_rnn(n, kind); };
  s.infer = [kind](ir::InferContext& ctx) { infer_rnn(ctx, kind); };
  s.run = [kind](RunContext& ctx) {
    dispatch_float(ctx.input(0).dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      run_rnn_typed<T>(ctx, kind);
    }, kind_name(kind));
  };
  reg.add(std::move(s));
}

}  // namespace

void register_misc_rnn_ops(ir::OpRegistry& r) {
  add_rnn_op(r, RnnKind::rnn, 1);
  add_rnn_op(r, RnnKind::gru, 1);
  add_rnn_op(r, RnnKind::lstm, 1);
}

}  // namespace kiln::ops
