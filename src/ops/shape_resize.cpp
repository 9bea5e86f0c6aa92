// Spatial data-movement ops of the shape family: Pad, Resize, Upsample, DepthToSpace,
// SpaceToDepth.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/shape_common.hpp"

namespace kiln::ops::shape_detail {

namespace {

using ir::Dim;
using ir::PartialShape;

// ---------------- Pad ----------------

enum class PadMode { constant, reflect, edge, wrap };

PadMode pad_mode(const ir::Node& n) {
  std::string m = n.attr_s("mode", "constant");
  if (m == "constant") return PadMode::constant;
  if (m == "reflect") return PadMode::reflect;
  if (m == "edge") return PadMode::edge;
  if (m == "wrap") return PadMode::wrap;
  throw Error(cat(n.describe(), ": mode must be constant, reflect, edge or wrap, got '", m, "'"));
}

// Full-rank pads [b0..b(r-1), e0..e(r-1)] from the pads (and optional axes) values.
std::vector<int64_t> full_pads(const ir::Node& n, const std::vector<int64_t>& pads, const std::vector<int64_t>* axes,
                               int64_t rank) {
  std::vector<int64_t> out(static_cast<size_t>(2 * rank), 0);
  if (!axes) {
    if (static_cast<int64_t>(pads.size()) != 2 * rank)
      throw Error(cat(n.describe(), ": pads [", join(pads), "] must have 2 * rank = ", 2 * rank, " entries"));
    return pads;
  }
  const size_t na = axes->size();
  if (pads.size() != 2 * na)
    throw Error(cat(n.describe(), ": pads [", join(pads), "] must have 2 * len(axes) = ", 2 * na, " entries"));
  for (size_t i = 0; i < na; ++i) {
    size_t a = static_cast<size_t>(ir::normalize_axis((*axes)[i], rank, n));
    out[a] = pads[i];
    out[a + static_cast<size_t>(rank)] = pads[i + na];
  }
  return out;
}

std::vector<int64_t> node_pads(const RunContext& ctx, int64_t rank) {
  std::vector<int64_t> pads;
  if (ctx.has_input(1)) {
    require_int_dtype(ctx, 1, "Pad pads");
    pads = ctx.input(1).to_i64();
  } else {
    pads = ctx.node().attr_ints("pads");
  }
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    require_int_dtype(ctx, 3, "Pad axes");
    axes = ctx.input(3).to_i64();
  }
  return full_pads(ctx.node(), pads, ctx.has_input(3) ? &axes : nullptr, rank);
}

void add_pad(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Pad";
  s.since_version = 2;
  s.min_inputs = 1;
  s.max_inputs = 4;
  s.attrs = {{"mode", ir::AttrType::s}, {"value", ir::AttrType::f}, {"pads", ir::AttrType::ints}};
  s.validate = [](const ir::Node& n) {
    pad_mode(n);
    if (!n.has_input(1) && !n.has_attr("pads")) throw Error(cat(n.describe(), ": pads are missing"));
  };
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    const PartialShape& in = ctx.input_shape(0);
    if (!in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    const int64_t rank = static_cast<int64_t>(in.rank());
    std::vector<int64_t> pads, axes;
    bool have = ctx.has_input(1) ? const_ints(ctx, 1, pads) : (pads = ctx.node().attr_ints("pads"), true);
    bool have_axes = !ctx.has_input(3) || const_ints(ctx, 3, axes);
    if (!have || !have_axes) {
      ctx.set_output(0, dt, unknown_dims(in.rank()));
      return;
    }
    auto full = full_pads(ctx.node(), pads, ctx.has_input(3) ? &axes : nullptr, rank);
    std::vector<Dim> out = in.dims;
    for (size_t k = 0; k < in.rank(); ++k) {
      int64_t add = full[k] + full[k + in.rank()];
      if (add == 0) continue;
      if (in.dims[k].is_static()) {
        int64_t d = in.dims[k].value + add;
        if (d < 0) throw ctx.error("pads [", join(pads), "] make dim ", k, " negative");
        out[k] = Dim(d);
      } else {
        out[k] = Dim::unknown();
      }
    }
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Shape& in = x.shape();
    const size_t rank = in.size();
    auto pads = node_pads(ctx, static_cast<int64_t>(rank));
    PadMode mode = pad_mode(ctx.node());
    Shape os(rank);
    for (size_t k = 0; k < rank; ++k) {
      os[k] = in[k] + pads[k] + pads[k + rank];
      if (os[k] < 0) throw ctx.error("pads [", join(pads), "] make dim ", k, " of ", shape_to_string(in), " negative");
      if (mode != PadMode::constant && in[k] == 0 && os[k] > 0)
        throw ctx.error("cannot pad an empty axis ", k, " in mode ", ctx.node().attr_s("mode"));
    }
    // per-dim source coordinate of each output coordinate (-1 = constant)
    std::vector<std::vector<int64_t>> map(rank);
    for (size_t k = 0; k < rank; ++k) {
      const int64_t d = in[k];
      map[k].resize(static_cast<size_t>(os[k]));
      for (int64_t o = 0; o < os[k]; ++o) {
        int64_t c = o - pads[k];
        if (c < 0 || c >= d) {
          switch (mode) {
            case PadMode::constant: c = -1; break;
            case PadMode::edge: c = std::clamp<int64_t>(c, 0, d - 1); break;
            case PadMode::wrap: c = ((c % d) + d) % d; break;
            case PadMode::reflect:
              if (d == 1) {
                c = 0;
              } else {
                const int64_t period = 2 * (d - 1);
                c = ((c % period) + period) % period;
                if (c >= d) c = period - c;
              }
              break;
          }
        }
        map[k][static_cast<size_t>(o)] = c;
      }
    }
    checked_numel(ctx, os);
    Tensor& y = ctx.allocate_output(0, x.dtype(), os);
    const int64_t n = y.size();
    if (n == 0) return;
    double cv = ctx.node().attr_f("value", 0.0f);
    bool cv_from_input = ctx.has_input(2) && ctx.input(2).size() > 0;
    if (cv_from_input && ctx.input(2).dtype() != x.dtype())
      throw ctx.error("constant_value element type ", dtype_name(ctx.input(2).dtype()), " differs from data ",
                      dtype_name(x.dtype()));
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T cval;
      if (cv_from_input) cval = ctx.input(2).data<T>()[0];
      else if constexpr (std::is_same_v<T, bool>) cval = cv != 0;
      else cval = static_cast<T>(static_cast<std::conditional_t<std::is_integral_v<T>, double, float>>(cv));
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      if (rank == 0) {
        dst[0] = src[0];
        return;
      }
      auto st = strides_of(in);
      const int64_t inner = os[rank - 1];
      const std::vector<int64_t>& last = map[rank - 1];
      std::vector<int64_t> idx(rank, 0);
      for (int64_t o = 0; o < n; o += inner) {
        bool row_const = false;
        int64_t base = 0;
        for (size_t k = 0; k + 1 < rank; ++k) {
          int64_t c = map[k][static_cast<size_t>(idx[k])];
          if (c < 0) row_const = true;
          else base += c * st[k];
        }
        for (int64_t j = 0; j < inner; ++j) {
          int64_t c = last[static_cast<size_t>(j)];
          dst[o + j] = (row_const || c < 0) ? cval : src[base + c];
        }
        for (size_t k = rank - 1; k-- > 0;) {
          if (++idx[k] < os[k]) break;
          idx[k] = 0;
        }
      }
    }, "Pad");
  };
  strings_as_indices(s, {0, 2});
  r.add(std::move(s));
}

// ---------------- Resize / Upsample ----------------

enum class Interp { nearest, linear, cubic };
enum class Coord {
  half_pixel,
  half_pixel_symmetric,  // opset 19
  pytorch_half_pixel,
  align_corners,
  asymmetric,
  tf_half_pixel_for_nn,
  tf_crop_and_resize
};
enum class NearestMode { round_prefer_floor, round_prefer_ceil, floor, ceil, simple };

struct ResizeParams {
  Interp mode = Interp::nearest;
  Coord coord = Coord::half_pixel;
  NearestMode nearest = NearestMode::round_prefer_floor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  bool antialias = false;  // opset 18: linear / cubic downscaling stretches the filter by 1 / scale
};

Interp parse_interp(const ir::Node& n) {
  std::string m = n.attr_s("mode", "nearest");
  if (m == "nearest") return Interp::nearest;
  if (m == "linear" || m == "bilinear") return Interp::linear;
  if (m == "cubic" && n.op_type() == "Resize") return Interp::cubic;
  throw Error(cat(n.describe(), ": mode must be nearest, linear", n.op_type() == "Resize" ? " or cubic" : "", ", got '", m, "'"));
}

ResizeParams resize_params(const ir::Node& n) {
  ResizeParams p;
  p.mode = parse_interp(n);
  if (n.op_type() == "Upsample" || n.opset() == 10) {
    p.coord = Coord::asymmetric;
    p.nearest = NearestMode::simple;
    return p;
  }
  std::string c = n.attr_s("coordinate_transformation_mode", "half_pixel");
  if (c == "half_pixel") p.coord = Coord::half_pixel;
  else if (c == "half_pixel_symmetric") p.coord = Coord::half_pixel_symmetric;
  else if (c == "pytorch_half_pixel") p.coord = Coord::pytorch_half_pixel;
  else if (c == "align_corners") p.coord = Coord::align_corners;
  else if (c == "asymmetric") p.coord = Coord::asymmetric;
  else if (c == "tf_half_pixel_for_nn") p.coord = Coord::tf_half_pixel_for_nn;
  else if (c == "tf_crop_and_resize") p.coord = Coord::tf_crop_and_resize;
  else throw Error(cat(n.describe(), ": unsupported coordinate_transformation_mode '", c, "'"));
  std::string nm = n.attr_s("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") p.nearest = NearestMode::round_prefer_floor;
  else if (nm == "round_prefer_ceil") p.nearest = NearestMode::round_prefer_ceil;
  else if (nm == "floor") p.nearest = NearestMode::floor;
  else if (nm == "ceil") p.nearest = NearestMode::ceil;
  else throw Error(cat(n.describe(), ": unsupported nearest_mode '", nm, "'"));
  p.cubic_a = n.attr_f("cubic_coeff_a", -0.75f);
  p.exclude_outside = n.attr_i("exclude_outside", 0) != 0;
  p.extrapolation = n.attr_f("extrapolation_value", 0.0f);
  p.antialias = n.attr_i("antialias", 0) != 0;
  const std::string k = n.attr_s("keep_aspect_ratio_policy", "stretch");
  if (k != "stretch" && k != "not_larger" && k != "not_smaller")
    throw Error(cat(n.describe(), ": keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got '", k, "'"));
  return p;
}

// Maps an output coordinate to the input coordinate along one axis.
// out_len is the (possibly fractional) resized length in * scale, as the ONNX reference uses;
// out_d the integer one.
double original_coord(const ResizeParams& p, int64_t x, double scale, int64_t in_d, int64_t out_d, double out_len,
                      double roi_s, double roi_e) {
  const double xr = static_cast<double>(x);
  switch (p.coord) {
    case Coord::half_pixel: return (xr + 0.5) / scale - 0.5;
    case Coord::half_pixel_symmetric: {
      const double adjustment = static_cast<double>(out_d) / out_len;
      const double center = static_cast<double>(in_d) / 2;
      return center * (1 - adjustment) + (xr + 0.5) / scale - 0.5;
    }
    case Coord::pytorch_half_pixel: return out_len > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
    case Coord::align_corners:
      return out_len == 1 ? 0.0 : xr * static_cast<double>(in_d - 1) / (out_len - 1);
    case Coord::asymmetric: return xr / scale;
    case Coord::tf_half_pixel_for_nn: return (xr + 0.5) / scale;
    case Coord::tf_crop_and_resize:
      return out_len != 1 ? roi_s * static_cast<double>(in_d - 1) +
                                xr * (roi_e - roi_s) * static_cast<double>(in_d - 1) / (out_len - 1)
                          : 0.5 * (roi_s + roi_e) * static_cast<double>(in_d - 1);
  }
  return xr;
}

int64_t nearest_index(const ResizeParams& p, double x, double scale) {
  double f = std::floor(x);
  switch (p.nearest) {
    case NearestMode::round_prefer_floor: return static_cast<int64_t>(x - f == 0.5 ? f : std::round(x));
    case NearestMode::round_prefer_ceil: return static_cast<int64_t>(x - f == 0.5 ? f + 1 : std::round(x));
    case NearestMode::floor: return static_cast<int64_t>(f);
    case NearestMode::ceil: return static_cast<int64_t>(std::ceil(x));
    case NearestMode::simple: return static_cast<int64_t>(scale < 1 ? std::ceil(x) : f);
  }
  return static_cast<int64_t>(f);
}

// One axis of a separable resize: for each output coordinate, K taps (index, weight),
// or extrapolate.
struct AxisPlan {
  int64_t K = 1;
  std::vector<int64_t> idx;   // out_d * K
  std::vector<double> w;      // out_d * K
  std::vector<char> extrap;   // out_d
};

// Cubic convolution kernel (Keys, parameter A) at distance d.
double cubic_weight(double d, double A) {
  d = std::fabs(d);
  if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
  if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
  return 0.0;
}

AxisPlan plan_axis(const ResizeParams& p, double scale, int64_t in_d, int64_t out_d, double out_len, double roi_s,
                   double roi_e) {
  AxisPlan a;
  // antialias (linear / cubic, downscaling): the filter stretched by 1 / scale, normalised
  const bool stretched = p.antialias && p.mode != Interp::nearest && scale < 1;
  const double reach = stretched ? (p.mode == Interp::linear ? 1.0 : 2.0) / scale : 0;
  if (reach > 4.0 * static_cast<double>(in_d) + 8)
    throw Error(cat("Resize: antialias filter of ", reach, " input pixels for an axis of ", in_d, " (scale ", scale, ")"));
  const int64_t start = stretched ? static_cast<int64_t>(std::floor(-reach)) + 1 : 0;
  a.K = p.mode == Interp::nearest ? 1 : stretched ? 2 - 2 * start : p.mode == Interp::linear ? 2 : 4;
  a.idx.assign(static_cast<size_t>(out_d * a.K), 0);
  a.w.assign(static_cast<size_t>(out_d * a.K), 0.0);
  a.extrap.assign(static_cast<size_t>(out_d), 0);
  for (int64_t o = 0; o < out_d; ++o) {
    double x = original_coord(p, o, scale, in_d, out_d, out_len, roi_s, roi_e);
    size_t b = static_cast<size_t>(o * a.K);
    if (p.coord == Coord::tf_crop_and_resize && (x < 0 || x > static_cast<double>(in_d - 1))) {
      a.extrap[static_cast<size_t>(o)] = 1;
      continue;
    }
    if (p.mode == Interp::nearest) {
      a.idx[b] = std::clamp<int64_t>(nearest_index(p, x, scale), 0, in_d - 1);
      a.w[b] = 1.0;
      continue;
    }
    const double f = std::floor(x);
    const double t = x - f;
    const int64_t x0 = static_cast<int64_t>(f);
    if (stretched) {
      double sum = 0;
      std::vector<double> c(static_cast<size_t>(a.K));
      for (int64_t k = 0; k < a.K; ++k) {
        const double arg = (static_cast<double>(start + k) - t) * scale;
        double w = p.mode == Interp::linear ? std::max(0.0, 1 - std::fabs(arg)) : cubic_weight(arg, p.cubic_a);
        const int64_t i = x0 + start + k;
        if (p.exclude_outside && (i < 0 || i >= in_d)) w = 0;
        c[static_cast<size_t>(k)] = w;
        sum += w;
        a.idx[b + static_cast<size_t>(k)] = std::clamp<int64_t>(i, 0, in_d - 1);
      }
      for (int64_t k = 0; k < a.K; ++k) a.w[b + static_cast<size_t>(k)] = sum != 0 ? c[static_cast<size_t>(k)] / sum : 0;
      continue;
    }
    double c[4];
    int64_t first;
    if (p.mode == Interp::linear) {
      c[0] = 1.0 - t;
      c[1] = t;
      first = x0;
    } else {
      const double A = p.cubic_a;
      auto far = [&](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };    // 1 < |d| < 2
      auto near = [&](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };        // |d| <= 1
      c[0] = far(t + 1);
      c[1] = near(t);
      c[2] = near(1 - t);
      c[3] = far(2 - t);
      first = x0 - 1;
    }
    double sum = 0;
    for (int64_t k = 0; k < a.K; ++k) {
      int64_t i = first + k;
      bool outside = i < 0 || i >= in_d;
      if (p.exclude_outside && outside) c[k] = 0;
      sum += c[k];
      a.idx[b + static_cast<size_t>(k)] = std::clamp<int64_t>(i, 0, in_d - 1);
    }
    for (int64_t k = 0; k < a.K; ++k) a.w[b + static_cast<size_t>(k)] = (p.exclude_outside && sum != 0) ? c[k] / sum : c[k];
  }
  return a;
}

struct ResizeSpec {
  Shape out;
  std::vector<double> scales;
  std::vector<double> out_len;  // in * scale (== out when sizes are given)
  std::vector<double> roi;  // 2 * rank (starts, ends) or empty
};

void resize_run(RunContext& ctx, const Tensor& x, const ResizeSpec& spec, const ResizeParams& p) {
  const Shape& in = x.shape();
  const size_t rank = in.size();
  checked_numel(ctx, spec.out);
  Tensor y(x.dtype(), spec.out);
  if (y.size() == 0) {
    ctx.set_output(0, y);
    return;
  }
  if (x.size() == 0) throw ctx.error("cannot resize an empty tensor ", shape_to_string(in), " to ", shape_to_string(spec.out));
  std::vector<size_t> axes;
  for (size_t k = 0; k < rank; ++k)
    if (in[k] != spec.out[k] || spec.scales[k] != 1.0 || p.coord == Coord::tf_crop_and_resize) axes.push_back(k);
  if (p.mode == Interp::nearest) {
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;  // no vector<bool>
      S ext;
      if constexpr (std::is_same_v<T, bool>) ext = p.extrapolation != 0;
      else ext = static_cast<S>(static_cast<std::conditional_t<std::is_integral_v<T>, double, float>>(p.extrapolation));
      std::vector<S> cur(x.data<T>(), x.data<T>() + x.size());
      Shape cs = in;
      for (size_t k : axes) {
        const double roi_s = spec.roi.empty() ? 0 : spec.roi[k], roi_e = spec.roi.empty() ? 1 : spec.roi[k + rank];
        AxisPlan a = plan_axis(p, spec.scales[k], in[k], spec.out[k], spec.out_len[k], roi_s, roi_e);
        int64_t outer = 1, inner = 1;
        for (size_t i = 0; i < k; ++i) outer *= cs[i];
        for (size_t i = k + 1; i < rank; ++i) inner *= cs[i];
        const int64_t id = in[k], od = spec.out[k];
        std::vector<S> nxt(static_cast<size_t>(outer * od * inner));
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < od; ++j) {
            S* d = nxt.data() + (o * od + j) * inner;
            if (a.extrap[static_cast<size_t>(j)]) {
              std::fill(d, d + inner, ext);
              continue;
            }
            const S* s = cur.data() + (o * id + a.idx[static_cast<size_t>(j)]) * inner;
            std::copy(s, s + inner, d);
          }
        cur.swap(nxt);
        cs[k] = od;
      }
      T* py = y.data<T>();
      for (size_t i = 0; i < cur.size(); ++i) py[i] = static_cast<T>(cur[i]);
    }, "Resize");
  } else {
    dispatch_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<double> cur(static_cast<size_t>(x.size()));
      const T* px = x.data<T>();
      for (size_t i = 0; i < cur.size(); ++i) cur[i] = static_cast<double>(px[i]);
      Shape cs = in;
      for (size_t k : axes) {
        const double roi_s = spec.roi.empty() ? 0 : spec.roi[k], roi_e = spec.roi.empty() ? 1 : spec.roi[k + rank];
        AxisPlan a = plan_axis(p, spec.scales[k], in[k], spec.out[k], spec.out_len[k], roi_s, roi_e);
        int64_t outer = 1, inner = 1;
        for (size_t i = 0; i < k; ++i) outer *= cs[i];
        for (size_t i = k + 1; i < rank; ++i) inner *= cs[i];
        const int64_t id = in[k], od = spec.out[k];
        std::vector<double> nxt(static_cast<size_t>(outer * od * inner), 0.0);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < od; ++j) {
            double* d = nxt.data() + (o * od + j) * inner;
            if (a.extrap[static_cast<size_t>(j)]) {
              std::fill(d, d + inner, p.extrapolation);
              continue;
            }
            for (int64_t t = 0; t < a.K; ++t) {
              const size_t q = static_cast<size_t>(j * a.K + t);
              const double w = a.w[q];
              if (w == 0) continue;
              const double* s = cur.data() + (o * id + a.idx[q]) * inner;
              for (int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
            }
          }
        cur.swap(nxt);
        cs[k] = od;
      }
      T* py = y.data<T>();
      for (size_t i = 0; i < cur.size(); ++i) {
        if constexpr (std::is_integral_v<T>) {
          double v = std::nearbyint(cur[i]);
          v = std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()), static_cast<double>(std::numeric_limits<T>::max()));
          py[i] = static_cast<T>(v);
        } else if constexpr (std::is_same_v<T, double>) {
          py[i] = cur[i];
        } else {
          py[i] = static_cast<T>(static_cast<float>(cur[i]));
        }
      }
    }, "Resize");
  }
  ctx.set_output(0, y);
}

// Output shape from scales: floor(in * scale), as the float product ONNX runtimes use.
int64_t scaled_dim(int64_t in, double scale) {
  const double v = std::floor(static_cast<float>(in) * static_cast<float>(scale));
  if (!(v >= 0) || v > 1e15) return -1;  // rejected by checked_numel / the callers
  return static_cast<int64_t>(v);
}

void check_scales(const RunContext& ctx, const std::vector<double>& scales, size_t rank) {
  if (scales.size() != rank)
    throw ctx.error("scales has ", scales.size(), " entries for input rank ", rank);
  for (double s : scales)
    if (!(s > 0) || !std::isfinite(s)) throw ctx.error("scales must be positive, got [", join(scales), "]");
}

// The axes a Resize resizes (opset 18 attribute axes; all by default), normalised.
std::vector<size_t> resize_axis_list(const ir::Node& n, size_t rank) {
  std::vector<size_t> out;
  if (!n.has_attr("axes")) {
    for (size_t k = 0; k < rank; ++k) out.push_back(k);
    return out;
  }
  for (int64_t a : n.attr_ints("axes")) {
    const int64_t k = normalize_axis(a, static_cast<int64_t>(rank), n);
    KILN_CHECK(std::find(out.begin(), out.end(), static_cast<size_t>(k)) == out.end(),
               cat(n.describe(), ": axis ", a, " is repeated in axes"));
    out.push_back(static_cast<size_t>(k));
  }
  return out;
}

// With the axes attribute, sizes / scales hold one entry per listed axis: expanded to the
// full rank (the other axes keep their size, scale 1).
template <typename Err>
void resize_axes(const ir::Node& n, const Shape& in, std::vector<int64_t>& sizes, std::vector<double>& scales,
                 const Err& err) {
  if (!n.has_attr("axes")) return;
  const auto axes = resize_axis_list(n, in.size());
  auto expand = [&](auto& v, auto fill, const char* what) {
    if (v.empty()) return;
    if (v.size() != axes.size()) throw err(cat(what, " has ", v.size(), " entries for ", axes.size(), " axes"));
    std::vector<std::decay_t<decltype(v[0])>> full;
    for (size_t k = 0; k < in.size(); ++k) full.push_back(fill(k));
    for (size_t i = 0; i < axes.size(); ++i) full[axes[i]] = v[i];
    v = std::move(full);
  };
  expand(sizes, [&](size_t k) { return in[k]; }, "sizes");
  expand(scales, [](size_t) { return 1.0; }, "scales");
}

// Output shape, scales and fractional lengths of a Resize on input shape `in`, from its
// sizes or scales (each may be empty; with the axes attribute one entry per listed axis) and
// keep_aspect_ratio_policy. Throws kiln::Error naming the node.
ResizeSpec resize_spec(const ir::Node& n, const Shape& in, std::vector<int64_t> sizes, std::vector<double> scales) {
  auto err = [&](const std::string& m) { return Error(cat(n.describe(), ": ", m)); };
  const size_t rank = in.size();
  ResizeSpec spec;
  if (!sizes.empty() && !scales.empty()) throw err("only one of scales and sizes may be given");
  resize_axes(n, in, sizes, scales, err);
  if (!sizes.empty()) {
    if (sizes.size() != rank) throw err(cat("sizes [", join(sizes), "] has ", sizes.size(), " entries for input rank ", rank));
    for (size_t k = 0; k < rank; ++k)
      if (sizes[k] < 0) throw err(cat("sizes [", join(sizes), "] has a negative entry"));
    const std::string policy = n.attr_s("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") {
      // one scale for the axes given (the smallest / largest ratio), sizes rounded from it
      const auto axes = resize_axis_list(n, rank);
      double common = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0;
      for (size_t k : axes) {
        const double r = static_cast<double>(sizes[k]) / static_cast<double>(std::max<int64_t>(in[k], 1));
        common = policy == "not_larger" ? std::min(common, r) : std::max(common, r);
      }
      for (size_t k = 0; k < rank; ++k) {
        const bool listed = std::find(axes.begin(), axes.end(), k) != axes.end();
        spec.out.push_back(listed ? static_cast<int64_t>(std::nearbyint(common * static_cast<double>(in[k]))) : in[k]);
        spec.scales.push_back(listed ? common : 1.0);
        spec.out_len.push_back(static_cast<double>(spec.out.back()));
      }
    } else {
      spec.out = sizes;
      for (size_t k = 0; k < rank; ++k) {
        spec.scales.push_back(in[k] == 0 ? 1.0 : static_cast<double>(sizes[k]) / static_cast<double>(in[k]));
        spec.out_len.push_back(static_cast<double>(sizes[k]));
      }
    }
  } else if (!scales.empty()) {
    if (scales.size() != rank) throw err(cat("scales has ", scales.size(), " entries for input rank ", rank));
    for (double v : scales)
      if (!(v > 0) || !std::isfinite(v)) throw err(cat("scales must be positive, got [", join(scales), "]"));
    spec.scales = scales;
    for (size_t k = 0; k < rank; ++k) {
      spec.out.push_back(scaled_dim(in[k], scales[k]));
      spec.out_len.push_back(static_cast<double>(in[k]) * scales[k]);
    }
  } else {
    throw err("one of scales and sizes must be given");
  }
  return spec;
}

void add_resize(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Resize";
  s.since_version = 10;
  s.min_inputs = 1;
  s.max_inputs = 4;
  s.max_version = 19;
  s.attrs = {{"mode", ir::AttrType::s},
             {"coordinate_transformation_mode", ir::AttrType::s},
             {"nearest_mode", ir::AttrType::s},
             {"cubic_coeff_a", ir::AttrType::f},
             {"exclude_outside", ir::AttrType::i},
             {"extrapolation_value", ir::AttrType::f},
             {"antialias", ir::AttrType::i},
             {"axes", ir::AttrType::ints},
             {"keep_aspect_ratio_policy", ir::AttrType::s}};
  s.validate = [](const ir::Node& n) { resize_params(n); };
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    const PartialShape& in = ctx.input_shape(0);
    std::vector<int64_t> sizes;
    const ir::Node& n = ctx.node();
    if (n.has_attr("axes") || n.attr_s("keep_aspect_ratio_policy", "stretch") != "stretch") {
      // opset 18 forms: computed as the run does when the dims and sizes / scales are known
      std::vector<double> scales;
      const Tensor* sc = ctx.has_input(2) ? ctx.input_constant(2) : nullptr;
      if (sc) scales = sc->to_f64();
      const bool known = (!ctx.has_input(3) || const_ints(ctx, 3, sizes)) && (!ctx.has_input(2) || sc);
      if (known && in.is_static()) {
        ctx.set_output(0, dt, PartialShape(resize_spec(n, in.to_shape(), sizes, scales).out));
      } else {
        ctx.set_output(0, dt, in.rank_known ? unknown_dims(in.rank()) : PartialShape::unknown_rank());
      }
      return;
    }
    if (ctx.has_input(3) && const_ints(ctx, 3, sizes) && !sizes.empty()) {
      if (in.rank_known && sizes.size() != in.rank())
        throw ctx.error("sizes [", join(sizes), "] has ", sizes.size(), " entries for input rank ", in.rank());
      ctx.set_output(0, dt, PartialShape(Shape(sizes)));
      return;
    }
    if (!in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    const Tensor* sc = ctx.has_input(2) ? ctx.input_constant(2) : nullptr;
    if (sc && sc->size() > 0) {
      auto scales = sc->to_f64();
      if (scales.size() != in.rank())
        throw ctx.error("scales has ", scales.size(), " entries for input rank ", in.rank());
      std::vector<Dim> out;
      for (size_t k = 0; k < in.rank(); ++k) {
        if (scales[k] == 1.0) out.push_back(in.dims[k]);
        else if (in.dims[k].is_static()) out.push_back(Dim(scaled_dim(in.dims[k].value, scales[k])));
        else out.push_back(Dim::unknown());
      }
      ctx.set_output(0, dt, PartialShape(out));
      return;
    }
    ctx.set_output(0, dt, unknown_dims(in.rank()));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const size_t rank = x.rank();
    ResizeParams p = resize_params(ctx.node());
    ResizeSpec spec;
    std::vector<int64_t> sizes;
    if (ctx.has_input(3) && ctx.input(3).size() > 0) {
      require_int_dtype(ctx, 3, "Resize sizes");
      sizes = ctx.input(3).to_i64();
    }
    std::vector<double> scales;
    if (ctx.has_input(2) && ctx.input(2).size() > 0) {
      if (!is_floating(ctx.input(2).dtype())) throw ctx.error("scales must be a float tensor");
      scales = ctx.input(2).to_f64();
    }
    spec = resize_spec(ctx.node(), x.shape(), sizes, scales);
    if (p.coord == Coord::tf_crop_and_resize) {
      if (!ctx.has_input(1) || ctx.input(1).size() == 0)
        throw ctx.error("coordinate_transformation_mode tf_crop_and_resize needs roi");
      spec.roi = ctx.input(1).to_f64();
      if (ctx.node().has_attr("axes")) {  // [starts, ends] of the listed axes; the others keep all (0 .. 1)
        const auto axes = resize_axis_list(ctx.node(), rank);
        if (spec.roi.size() != 2 * axes.size())
          throw ctx.error("roi has ", spec.roi.size(), " entries, expected 2 * len(axes) = ", 2 * axes.size());
        std::vector<double> full(2 * rank, 0.0);
        for (size_t k = 0; k < rank; ++k) full[rank + k] = 1.0;
        for (size_t i = 0; i < axes.size(); ++i) {
          full[axes[i]] = spec.roi[i];
          full[rank + axes[i]] = spec.roi[axes.size() + i];
        }
        spec.roi = std::move(full);
      }
      if (spec.roi.size() != 2 * rank) throw ctx.error("roi has ", spec.roi.size(), " entries, expected 2 * rank = ", 2 * rank);
    }
    resize_run(ctx, x, spec, p);
  };
  r.add(std::move(s));
}

void add_upsample(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Upsample";
  s.since_version = 7;
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.attrs = {{"mode", ir::AttrType::s}, {"scales", ir::AttrType::floats}};
  s.validate = [](const ir::Node& n) {
    parse_interp(n);
    if (!n.has_input(1) && !n.has_attr("scales")) throw Error(cat(n.describe(), ": scales are missing"));
  };
  s.infer = [](ir::InferContext& ctx) {
    DType dt = ctx.input_dtype(0);
    const PartialShape& in = ctx.input_shape(0);
    if (!in.rank_known) {
      ctx.set_output(0, dt, PartialShape::unknown_rank());
      return;
    }
    std::vector<double> scales;
    if (ctx.has_input(1)) {
      if (const Tensor* t = ctx.input_constant(1)) scales = t->to_f64();
    } else {
      for (float f : ctx.node().attr_floats("scales")) scales.push_back(f);
    }
    if (scales.size() != in.rank()) {
      ctx.set_output(0, dt, unknown_dims(in.rank()));
      return;
    }
    std::vector<Dim> out;
    for (size_t k = 0; k < in.rank(); ++k) {
      if (scales[k] == 1.0) out.push_back(in.dims[k]);
      else if (in.dims[k].is_static()) out.push_back(Dim(scaled_dim(in.dims[k].value, scales[k])));
      else out.push_back(Dim::unknown());
    }
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    std::vector<double> scales;
    if (ctx.has_input(1)) {
      scales = ctx.input(1).to_f64();
    } else {
      for (float f : ctx.node().attr_floats("scales")) scales.push_back(f);
    }
    check_scales(ctx, scales, x.rank());
    ResizeSpec spec;
    spec.scales = scales;
    for (size_t k = 0; k < x.rank(); ++k) {
      spec.out.push_back(scaled_dim(x.shape()[k], scales[k]));
      spec.out_len.push_back(static_cast<double>(x.shape()[k]) * scales[k]);
    }
    resize_run(ctx, x, spec, resize_params(ctx.node()));
  };
  r.add(std::move(s));
}

// ---------------- DepthToSpace / SpaceToDepth ----------------

void add_depth_space(ir::OpRegistry& r) {
  for (bool d2s : {true, false}) {
    ir::OpSchema s;
    s.name = d2s ? "DepthToSpace" : "SpaceToDepth";
    s.since_version = 1;
    s.attrs = {{"blocksize", ir::AttrType::i, true}};
    if (d2s) s.attrs.push_back({"mode", ir::AttrType::s});
    s.validate = [](const ir::Node& n) {
      if (n.attr_i("blocksize") < 1) throw Error(cat(n.describe(), ": blocksize must be >= 1, got ", n.attr_i("blocksize")));
      std::string m = n.attr_s("mode", "DCR");
      if (m != "DCR" && m != "CRD") throw Error(cat(n.describe(), ": mode must be DCR or CRD, got '", m, "'"));
    };
    s.infer = [d2s](ir::InferContext& ctx) {
      DType dt = ctx.input_dtype(0);
      const PartialShape& in = ctx.input_shape(0);
      if (!in.rank_known) {
        ctx.set_output(0, dt, unknown_dims(4));
        return;
      }
      if (in.rank() != 4) throw ctx.error("input must be 4-D (NCHW), got ", in.to_string());
      const int64_t b = ctx.node().attr_i("blocksize");
      auto div = [&](const Dim& d, int64_t q) -> Dim {
        if (!d.is_static()) return Dim::unknown();
        if (d.value % q != 0) throw ctx.error("dim ", d.value, " of ", in.to_string(), " is not divisible by ", q);
        return Dim(d.value / q);
      };
      if (d2s)
        ctx.set_output(0, dt, PartialShape({in.dims[0], div(in.dims[1], b * b), ir::dim_mul(in.dims[2], Dim(b)), ir::dim_mul(in.dims[3], Dim(b))}));
      else
        ctx.set_output(0, dt, PartialShape({in.dims[0], ir::dim_mul(in.dims[1], Dim(b * b)), div(in.dims[2], b), div(in.dims[3], b)}));
    };
    s.run = [d2s](RunContext& ctx) {
      const Tensor& x = ctx.input(0);
      if (x.rank() != 4) throw ctx.error("input must be 4-D (NCHW), got ", shape_to_string(x.shape()));
      const int64_t b = ctx.node().attr_i("blocksize");
      const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
      if (d2s) {
        if (C % (b * b) != 0) throw ctx.error("channels ", C, " are not divisible by blocksize^2 = ", b * b);
        const int64_t c = C / (b * b);
        Tensor& y = ctx.allocate_output(0, x.dtype(), {N, c, H * b, W * b});
        if (ctx.node().attr_s("mode", "DCR") == "DCR")
          transpose_into(x, {N, b, b, c, H, W}, {0, 3, 4, 1, 5, 2}, y);
        else
          transpose_into(x, {N, c, b, b, H, W}, {0, 1, 4, 2, 5, 3}, y);
      } else {
        if (H % b != 0 || W % b != 0)
          throw ctx.error("spatial dims ", H, "x", W, " are not divisible by blocksize ", b);
        Tensor& y = ctx.allocate_output(0, x.dtype(), {N, C * b * b, H / b, W / b});
        transpose_into(x, {N, C, H / b, b, W / b, b}, {0, 3, 5, 1, 2, 4}, y);
      }
    };
    r.add(std::move(s));
  }
}

}  // namespace

void register_resize_ops(ir::OpRegistry& r) {
  add_pad(r);
  add_resize(r);
  add_upsample(r);
  add_depth_space(r);
}

}  // namespace kiln::ops::shape_detail
