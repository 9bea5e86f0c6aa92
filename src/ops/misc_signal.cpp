// Signal processing ops (opset 17): HannWindow, HammingWindow, BlackmanWindow, DFT, STFT,
// MelWeightMatrix. Complex tensors carry a trailing dimension of 2 (real, imaginary).
// Transforms are plain O(n^2) DFTs in double precision with an exact twiddle table.
#include <cmath>
#include <complex>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

// Shared with misc_random.cpp (defined in misc.cpp).
void misc_store_f64(Tensor& t, const std::vector<double>& v, const char* what);

namespace {

using cd = std::complex<double>;

// Reads a scalar integer input (a 0-d or 1-element tensor).
int64_t scalar_int(const RunContext& ctx, size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.size() != 1 || !is_integral(t.dtype()))
    throw ctx.error("input ", name, " must be an integer scalar, got ", dtype_name(t.dtype()), " ",
                    shape_to_string(t.shape()));
  return t.to_i64()[0];
}

double scalar_num(const RunContext& ctx, size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.size() != 1 || t.dtype() == DType::boolean)
    throw ctx.error("input ", name, " must be a numeric scalar, got ", shape_to_string(t.shape()));
  return t.to_f64()[0];
}

// Static value of a scalar int input if it is a constant.
std::optional<int64_t> const_scalar(const ir::InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const Tensor* t = ctx.input_constant(i);
  if (!t || t->size() != 1 || !is_integral(t->dtype())) return std::nullopt;
  return t->to_i64()[0];
}

// ---------------------------------------------------------------- windows

enum class Window { hann, hamming, blackman };

void add_window(ir::OpRegistry& r, const char* name, Window kind) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = 17;
  s.min_inputs = 1;
  s.max_inputs = 1;
  s.attrs = {{"output_datatype", ir::AttrType::i}, {"periodic", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) { dtype_attr(n, "output_datatype", DType::f32); };
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    DType dt = dtype_attr(n, "output_datatype", DType::f32);
    auto size = const_scalar(ctx, 0);
    ctx.set_output(0, dt, ir::PartialShape({size && *size >= 0 ? ir::Dim(*size) : ir::Dim::unknown()}));
  };
  s.run = [kind](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const int64_t size = scalar_int(ctx, 0, "size");
    if (size < 0) throw ctx.error("window size must be >= 0, got ", size);
    const bool periodic = n.attr_i("periodic", 1) != 0;
    const double N = static_cast<double>(periodic ? size : size - 1);
    const double pi = std::numbers::pi;
    std::vector<double> w(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) {
      const double x = N > 0 ? 2 * pi * static_cast<double>(i) / N : 0.0;
      switch (kind) {
        case Window::hann: w[static_cast<size_t>(i)] = 0.5 - 0.5 * std::cos(x); break;
        case Window::hamming: w[static_cast<size_t>(i)] = 25.0 / 46 - 21.0 / 46 * std::cos(x); break;
        case Window::blackman: w[static_cast<size_t>(i)] = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x); break;
      }
    }
    DType dt = dtype_attr(n, "output_datatype", DType::f32);
    misc_store_f64(ctx.allocate_output(0, dt, {size}), w, n.op_type().c_str());
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------- DFT core

// out[k] = sum_n in[n] * exp(sign * 2*pi*i*k*n / L), k in [0, nout), n in [0, nin), nin <= L.
void dft_line(const cd* in, int64_t nin, int64_t L, bool inverse, cd* out, int64_t nout,
              const std::vector<cd>& twiddle) {
  for (int64_t k = 0; k < nout; ++k) {
    cd acc(0, 0);
    int64_t idx = 0;  // (k * n) mod L, incrementally
    for (int64_t n = 0; n < nin; ++n) {
      acc += in[n] * (inverse ? std::conj(twiddle[static_cast<size_t>(idx)]) : twiddle[static_cast<size_t>(idx)]);
      idx += k;
      if (idx >= L) idx %= L;
    }
    out[k] = inverse ? acc / static_cast<double>(L) : acc;
  }
}

std::vector<cd> make_twiddle(int64_t L) {
  std::vector<cd> t(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    const double a = -2 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(L);
    t[static_cast<size_t>(i)] = cd(std::cos(a), std::sin(a));
  }
  return t;
}

// Complex values of a [..., 1|2] tensor.
std::vector<cd> load_complex(const RunContext& ctx, const Tensor& t, const char* name) {
  if (!is_floating(t.dtype())) throw ctx.error("input ", name, " must be a floating point tensor");
  if (t.rank() < 1 || (t.shape().back() != 1 && t.shape().back() != 2))
    throw ctx.error("input ", name, " must end with a dimension of 1 (real) or 2 (complex), got ",
                    shape_to_string(t.shape()));
  const std::vector<double> v = t.to_f64();
  const bool cplx = t.shape().back() == 2;
  std::vector<cd> out(static_cast<size_t>(t.size() / t.shape().back()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = cplx ? cd(v[2 * i], v[2 * i + 1]) : cd(v[i], 0);
  return out;
}

void store_complex(Tensor& t, const std::vector<cd>& v, const char* what) {
  std::vector<double> flat(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    flat[2 * i] = v[i].real();
    flat[2 * i + 1] = v[i].imag();
  }
  misc_store_f64(t, flat, what);
}

// The signal axis: input 2 (opset 20; normalize_opset moves the attribute of DFT-17 there),
// default -2, the last signal dimension. The last dim of the input holds real / imaginary.
int64_t dft_axis(const ir::Node& n, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  KILN_CHECK(a >= 0 && a < rank - 1, cat(n.describe(), ": axis ", axis, " must index a signal dimension of the rank-",
                                         rank, " input (not the last one)"));
  return a;
}

void register_dft(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "DFT";
  s.since_version = 17;
  s.max_version = 20;
  s.min_inputs = 1;
  s.max_inputs = 3;
  s.attrs = {{"inverse", ir::AttrType::i}, {"onesided", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    const auto& xs = ctx.input_shape(0);
    std::optional<int64_t> axis = int64_t(-2);
    if (ctx.has_input(2)) axis = const_scalar(ctx, 2);
    if (!xs.rank_known || !axis) {
      ctx.set_output(0, ctx.input_dtype(0),
                     xs.rank_known ? ir::PartialShape(std::vector<ir::Dim>(xs.rank(), ir::Dim::unknown()))
                                   : ir::PartialShape::unknown_rank());
      return;
    }
    const int64_t rank = static_cast<int64_t>(xs.rank());
    if (rank < 2) throw ctx.error("input must have rank >= 2, got ", xs.to_string());
    const int64_t a = dft_axis(n, *axis, rank);
    ir::PartialShape out = xs;
    ir::Dim len = xs.dims[static_cast<size_t>(a)];
    if (ctx.has_input(1)) {
      auto c = const_scalar(ctx, 1);
      len = c ? ir::Dim(*c) : ir::Dim::unknown();
    }
    if (n.attr_i("onesided", 0) != 0) len = len.is_static() ? ir::Dim(len.value / 2 + 1) : ir::Dim::unknown();
    out.dims[static_cast<size_t>(a)] = len;
    out.dims.back() = 2;
    ctx.set_output(0, ctx.input_dtype(0), out);
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& X = ctx.input(0);
    if (X.rank() < 2) throw ctx.error("input must have rank >= 2, got ", shape_to_string(X.shape()));
    const int64_t rank = static_cast<int64_t>(X.rank());
    const int64_t a = dft_axis(n, ctx.has_input(2) ? scalar_int(ctx, 2, "axis") : -2, rank);
    const std::vector<cd> x = load_complex(ctx, X, "input");
    const int64_t nin_full = X.shape()[static_cast<size_t>(a)];
    int64_t L = nin_full;
    if (ctx.has_input(1)) {
      L = scalar_int(ctx, 1, "dft_length");
      if (L <= 0) throw ctx.error("dft_length must be positive, got ", L);
    }
    const bool inverse = n.attr_i("inverse", 0) != 0;
    const bool onesided = n.attr_i("onesided", 0) != 0;
    const int64_t nout = onesided ? L / 2 + 1 : L;
    const int64_t nin = std::min(nin_full, L);
    // outer = product of dims before the axis, inner = product of signal dims after it
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < a; ++d) outer *= X.shape()[static_cast<size_t>(d)];
    for (int64_t d = a + 1; d < rank - 1; ++d) inner *= X.shape()[static_cast<size_t>(d)];
    Shape oshape = X.shape();
    oshape[static_cast<size_t>(a)] = nout;
    oshape.back() = 2;
    std::vector<cd> y(static_cast<size_t>(outer * nout * inner));
    const std::vector<cd> tw = make_twiddle(L);
    std::vector<cd> line_in(static_cast<size_t>(nin)), line_out(static_cast<size_t>(nout));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t k = 0; k < nin; ++k) line_in[static_cast<size_t>(k)] = x[static_cast<size_t>((o * nin_full + k) * inner + i)];
        dft_line(line_in.data(), nin, L, inverse, line_out.data(), nout, tw);
        for (int64_t k = 0; k < nout; ++k) y[static_cast<size_t>((o * nout + k) * inner + i)] = line_out[static_cast<size_t>(k)];
      }
    }
    store_complex(ctx.allocate_output(0, X.dtype(), oshape), y, "DFT");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------- STFT

void register_stft(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "STFT";
  s.since_version = 17;
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.attrs = {{"onesided", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    const auto& xs = ctx.input_shape(0);
    if (xs.rank_known && xs.rank() != 3)
      throw ctx.error("signal must have shape [batch, signal_length, 1|2], got ", xs.to_string());
    std::optional<int64_t> fl = const_scalar(ctx, 3);
    if (!fl && ctx.has_input(2)) {
      const auto& ws = ctx.input_shape(2);
      if (ws.rank_known && ws.rank() == 1 && ws.dims[0].is_static()) fl = ws.dims[0].value;
    }
    std::optional<int64_t> step = const_scalar(ctx, 1);
    ir::Dim sig = dim_or_unknown(xs, 1);
    ir::Dim frames, bins;
    if (fl && step && *step > 0 && sig.is_static() && sig.value >= *fl) frames = (sig.value - *fl) / *step + 1;
    if (fl) bins = n.attr_i("onesided", 1) != 0 ? *fl / 2 + 1 : *fl;
    ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape({dim_or_unknown(xs, 0), frames, bins, 2}));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& X = ctx.input(0);
    if (X.rank() != 3) throw ctx.error("signal must have shape [batch, signal_length, 1|2], got ", shape_to_string(X.shape()));
    const std::vector<cd> x = load_complex(ctx, X, "signal");
    const int64_t B = X.shape()[0], S = X.shape()[1];
    const int64_t step = scalar_int(ctx, 1, "frame_step");
    if (step <= 0) throw ctx.error("frame_step must be positive, got ", step);
    std::vector<double> window;
    if (ctx.has_input(2)) {
      const Tensor& w = ctx.input(2);
      if (w.rank() != 1) throw ctx.error("window must be 1-D, got ", shape_to_string(w.shape()));
      window = w.to_f64();
    }
    int64_t fl = -1;
    if (ctx.has_input(3)) fl = scalar_int(ctx, 3, "frame_length");
    if (fl < 0) {
      if (window.empty() && !ctx.has_input(2)) throw ctx.error("either window or frame_length must be given");
      fl = static_cast<int64_t>(window.size());
    }
    if (fl <= 0) throw ctx.error("frame_length must be positive, got ", fl);
    if (!window.empty() && static_cast<int64_t>(window.size()) != fl)
      throw ctx.error("window length ", window.size(), " does not match frame_length ", fl);
    if (fl > S) throw ctx.error("frame_length ", fl, " exceeds the signal length ", S);
    const int64_t frames = (S - fl) / step + 1;
    const int64_t bins = n.attr_i("onesided", 1) != 0 ? fl / 2 + 1 : fl;
    std::vector<cd> y(static_cast<size_t>(B * frames * bins));
    const std::vector<cd> tw = make_twiddle(fl);
    std::vector<cd> frame(static_cast<size_t>(fl));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t i = 0; i < fl; ++i) {
          cd v = x[static_cast<size_t>(b * S + f * step + i)];
          frame[static_cast<size_t>(i)] = window.empty() ? v : v * window[static_cast<size_t>(i)];
        }
        dft_line(frame.data(), fl, fl, false, y.data() + (b * frames + f) * bins, bins, tw);
      }
    }
    store_complex(ctx.allocate_output(0, X.dtype(), {B, frames, bins, 2}), y, "STFT");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------- MelWeightMatrix

void register_mel(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "MelWeightMatrix";
  s.since_version = 17;
  s.min_inputs = 5;
  s.max_inputs = 5;
  s.attrs = {{"output_datatype", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) { dtype_attr(n, "output_datatype", DType::f32); };
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    DType dt = dtype_attr(n, "output_datatype", DType::f32);
    auto mel = const_scalar(ctx, 0);
    auto dft = const_scalar(ctx, 1);
    ctx.set_output(0, dt, ir::PartialShape({dft ? ir::Dim(*dft / 2 + 1) : ir::Dim::unknown(),
                                            mel ? ir::Dim(*mel) : ir::Dim::unknown()}));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const int64_t num_mel = scalar_int(ctx, 0, "num_mel_bins");
    const int64_t dft_length = scalar_int(ctx, 1, "dft_length");
    const int64_t sample_rate = scalar_int(ctx, 2, "sample_rate");
    const double lower = scalar_num(ctx, 3, "lower_edge_hertz");
    const double upper = scalar_num(ctx, 4, "upper_edge_hertz");
    if (num_mel <= 0 || dft_length <= 0 || sample_rate <= 0)
      throw ctx.error("num_mel_bins, dft_length and sample_rate must be positive");
    if (!(lower >= 0 && upper > lower && std::isfinite(upper)))
      throw ctx.error("need 0 <= lower_edge_hertz < upper_edge_hertz, got ", lower, " and ", upper);
    const int64_t nspec = dft_length / 2 + 1;
    auto hz_to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
    const double low_mel = hz_to_mel(lower), high_mel = hz_to_mel(upper);
    const double mel_step = (high_mel - low_mel) / static_cast<double>(num_mel + 2);
    std::vector<int64_t> bins(static_cast<size_t>(num_mel + 2));
    for (int64_t i = 0; i < num_mel + 2; ++i) {
      const double mel = static_cast<double>(i) * mel_step + low_mel;
      const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
      bins[static_cast<size_t>(i)] =
          static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
    }
    std::vector<double> out(static_cast<size_t>(nspec * num_mel), 0.0);
    auto set = [&](int64_t j, int64_t i, double v) {
      if (j >= 0 && j < nspec) out[static_cast<size_t>(j * num_mel + i)] = v;
    };
    for (int64_t i = 0; i < num_mel; ++i) {
      const int64_t lo = bins[static_cast<size_t>(i)], ce = bins[static_cast<size_t>(i + 1)],
                    hi = bins[static_cast<size_t>(i + 2)];
      const int64_t low_to_center = ce - lo;
      if (low_to_center == 0) {
        set(ce, i, 1.0);
      } else {
        for (int64_t j = std::max<int64_t>(lo, 0); j <= std::min(ce, nspec - 1); ++j)
          set(j, i, static_cast<double>(j - lo) / static_cast<double>(low_to_center));
      }
      const int64_t center_to_high = hi - ce;
      if (center_to_high > 0)
        for (int64_t j = std::max<int64_t>(ce, 0); j < std::min(hi, nspec); ++j) set(j, i, static_cast<double>(hi - j) / static_cast<double>(center_to_high));
    }
    DType dt = dtype_attr(n, "output_datatype", DType::f32);
    misc_store_f64(ctx.allocate_output(0, dt, {nspec, num_mel}), out, "MelWeightMatrix");
  };
  r.add(std::move(s));
}

}  // namespace

void register_misc_signal_ops(ir::OpRegistry& r) {
  add_window(r, "HannWindow", Window::hann);
  add_window(r, "HammingWindow", Window::hamming);
  add_window(r, "BlackmanWindow", Window::blackman);
  register_dft(r);
  register_stft(r);
  register_mel(r);
}

}  // namespace kiln::ops
