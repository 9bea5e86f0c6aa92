// Detection / sampling ops: NonMaxSuppression, RoiAlign, GridSample.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

void misc_store_f64(Tensor& t, const std::vector<double>& v, const char* what);  // misc.cpp

namespace {

std::vector<double> load_f64(const Tensor& t) { return t.to_f64(); }

// floor(v) as an integer, clamped far outside any tensor extent (NaN maps low) so
// that converting never overflows.
int64_t safe_floor(double v) {
  if (!(v > -1e15)) return static_cast<int64_t>(-1e15);
  if (v > 1e15) return static_cast<int64_t>(1e15);
  return static_cast<int64_t>(std::floor(v));
}

// ---------------------------------------------------------------- NonMaxSuppression

// A box as corners, with its area (computed once: a class's candidates are each compared with
// every box kept before them, which for a detector's thousands of boxes is most of the op's time).
struct Box {
  double y1, x1, y2, x2, area;
};

Box make_box(const double* p, bool center) {
  Box b;
  if (center) {
    double xc = p[0], yc = p[1], w = p[2], h = p[3];
    b = {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2, 0};
  } else {
    b = {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3]), 0};
  }
  b.area = (b.y2 - b.y1) * (b.x2 - b.x1);
  return b;
}

// True when IOU(a, b) > threshold.
bool suppress_by_iou(const Box& a, const Box& b, double threshold) {
  double iy1 = std::max(a.y1, b.y1), ix1 = std::max(a.x1, b.x1);
  double iy2 = std::min(a.y2, b.y2), ix2 = std::min(a.x2, b.x2);
  if (iy2 <= iy1 || ix2 <= ix1) return false;  // no intersection
  double inter = (iy2 - iy1) * (ix2 - ix1);
  double uni = a.area + b.area - inter;
  if (a.area <= 0 || b.area <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

// The boxes one class has kept so far, in cells by their left edge: a candidate is compared
// only with the kept boxes whose x-range can meet its own (a box overlaps another only if
// their left edges are less than the widest box apart), a few cells instead of every kept box;
// the result is the same. A box with a non-finite corner or no area takes no part: it never
// suppresses and is never suppressed (suppress_by_iou is false for it).
class KeptBoxes {
 public:
  static bool takes_part(const Box& b) {
    return std::isfinite(b.x1) && std::isfinite(b.x2) && std::isfinite(b.y1) && std::isfinite(b.y2) &&
           std::isfinite(b.area) && b.area > 0;
  }
  // Cells for the boxes `cand` of `all` (the class's candidates); nothing kept.
  void reset(const std::vector<Box>& all, const std::vector<int64_t>& cand) {
    kept_.clear();
    for (auto& c : cells_) c.clear();
    double lo = std::numeric_limits<double>::infinity(), hi = -lo, width = 0;
    for (int64_t i : cand) {
      const Box& b = all[static_cast<size_t>(i)];
      if (!takes_part(b)) continue;
      lo = std::min(lo, b.x1);
      hi = std::max(hi, b.x1);
      width = std::max(width, b.x2 - b.x1);
    }
    if (lo > hi) {
      used_ = 0;
      return;
    }
    lo_ = lo;
    step_ = std::max(width, (hi - lo) / kCells);
    if (!(step_ > 0)) step_ = 1;
    used_ = static_cast<size_t>((hi - lo) / step_) + 1;  // at most kCells + 1
    if (cells_.size() < used_) cells_.resize(used_);
  }
  bool suppresses(const Box& b, double threshold) const {
    if (used_ == 0 || !takes_part(b)) return false;
    // cells of left edges in (b.x1 - width, b.x2), two more below and one above for rounding
    const int64_t first = std::max<int64_t>(0, static_cast<int64_t>(std::floor((b.x1 - lo_) / step_)) - 2);
    const int64_t last = std::min<int64_t>(static_cast<int64_t>(used_) - 1,
                                           static_cast<int64_t>(std::floor((b.x2 - lo_) / step_)) + 1);
    for (int64_t c = first; c <= last; ++c)
      for (uint32_t k : cells_[static_cast<size_t>(c)])
        if (suppress_by_iou(b, kept_[k], threshold)) return true;
    return false;
  }
  void keep(const Box& b) {
    if (used_ == 0 || !takes_part(b)) return;
    const int64_t c = std::clamp<int64_t>(static_cast<int64_t>(std::floor((b.x1 - lo_) / step_)), 0,
                                          static_cast<int64_t>(used_) - 1);
    cells_[static_cast<size_t>(c)].push_back(static_cast<uint32_t>(kept_.size()));
    kept_.push_back(b);
  }

 private:
  static constexpr double kCells = 4096;
  std::vector<Box> kept_;
  std::vector<std::vector<uint32_t>> cells_;
  size_t used_ = 0;
  double lo_ = 0, step_ = 1;
};

void register_nms(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "NonMaxSuppression";
  s.since_version = 10;
  s.min_inputs = 2;
  s.max_inputs = 5;
  s.attrs = {{"center_point_box", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    int64_t c = n.attr_i("center_point_box", 0);
    KILN_CHECK(c == 0 || c == 1, cat(n.describe(), ": attribute 'center_point_box' must be 0 or 1, got ", c));
  };
  s.infer = [](ir::InferContext& ctx) {
    ctx.set_output(0, DType::i64, ir::PartialShape({ir::Dim::unknown(), 3}));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& boxes = ctx.input(0);
    const Tensor& scores = ctx.input(1);
    if (!is_floating(boxes.dtype()) || !is_floating(scores.dtype()))
      throw ctx.error("boxes and scores must be floating point tensors");
    if (boxes.rank() != 3 || boxes.shape()[2] != 4)
      throw ctx.error("boxes must have shape [num_batches, spatial_dimension, 4], got ",
                      shape_to_string(boxes.shape()));
    if (scores.rank() != 3) throw ctx.error("scores must have rank 3, got ", shape_to_string(scores.shape()));
    const int64_t nb = boxes.shape()[0], ns = boxes.shape()[1], nc = scores.shape()[1];
    if (scores.shape()[0] != nb || scores.shape()[2] != ns)
      throw ctx.error("scores shape ", shape_to_string(scores.shape()), " does not match boxes shape ",
                      shape_to_string(boxes.shape()));
    auto scalar_of = [&](size_t i, const char* name) -> const Tensor* {
      if (!ctx.has_input(i)) return nullptr;
      return &one_value(ctx, ctx.input(i), cat("input ", name));
    };
    int64_t max_out = 0;
    if (const Tensor* t = scalar_of(2, "max_output_boxes_per_class")) max_out = t->to_i64()[0];
    double iou_th = 0;
    if (const Tensor* t = scalar_of(3, "iou_threshold")) iou_th = t->to_f64()[0];
    const Tensor* st = scalar_of(4, "score_threshold");
    const bool has_score_th = st != nullptr;
    const double score_th = st ? st->to_f64()[0] : 0.0;
    if (iou_th < 0 || iou_th > 1) throw ctx.error("iou_threshold must be in [0, 1], got ", iou_th);
    const bool center = ctx.node().attr_i("center_point_box", 0) == 1;

    const std::vector<double> bv = load_f64(boxes), sv = load_f64(scores);
    std::vector<int64_t> selected_out;
    std::vector<int64_t> cand, sel;
    std::vector<Box> all;
    KeptBoxes kept;
    for (int64_t b = 0; b < nb && max_out > 0; ++b) {
      all.clear();
      for (int64_t i = 0; i < ns; ++i) all.push_back(make_box(bv.data() + (b * ns + i) * 4, center));
      for (int64_t c = 0; c < nc; ++c) {
        const double* sc = sv.data() + (b * nc + c) * ns;
        cand.clear();
        for (int64_t i = 0; i < ns; ++i)
          if (!has_score_th || sc[i] > score_th) cand.push_back(i);
        std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t bb) { return sc[a] > sc[bb]; });
        sel.clear();
        kept.reset(all, cand);
        for (int64_t i : cand) {
          if (static_cast<int64_t>(sel.size()) >= max_out) break;
          const Box& bi = all[static_cast<size_t>(i)];
          if (kept.suppresses(bi, iou_th)) continue;
          sel.push_back(i);
          kept.keep(bi);
        }
        for (int64_t i : sel) {
          selected_out.push_back(b);
          selected_out.push_back(c);
          selected_out.push_back(i);
        }
      }
    }
    const int64_t n = static_cast<int64_t>(selected_out.size() / 3);
    Tensor& y = ctx.allocate_output(0, DType::i64, {n, 3});
    std::copy(selected_out.begin(), selected_out.end(), y.data<int64_t>());
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------- RoiAlign

std::string roi_ctm(const ir::Node& n) {
  return n.attr_s("coordinate_transformation_mode", n.opset() >= 16 || n.opset() == 0 ? "half_pixel"
                                                                                     : "output_half_pixel");
}

void register_roialign(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "RoiAlign";
  s.since_version = 10;
  s.min_inputs = 3;
  s.max_inputs = 3;
  s.attrs = {{"coordinate_transformation_mode", ir::AttrType::s}, {"mode", ir::AttrType::s},
             {"output_height", ir::AttrType::i}, {"output_width", ir::AttrType::i},
             {"sampling_ratio", ir::AttrType::i}, {"spatial_scale", ir::AttrType::f}};
  s.validate = [](const ir::Node& n) {
    std::string m = n.attr_s("mode", "avg");
    KILN_CHECK(m == "avg" || m == "max", cat(n.describe(), ": attribute 'mode' must be avg or max, got '", m, "'"));
    std::string c = roi_ctm(n);
    KILN_CHECK(c == "half_pixel" || c == "output_half_pixel",
               cat(n.describe(), ": attribute 'coordinate_transformation_mode' must be half_pixel or "
                                 "output_half_pixel, got '", c, "'"));
    KILN_CHECK(n.attr_i("output_height", 1) > 0 && n.attr_i("output_width", 1) > 0,
               cat(n.describe(), ": output_height and output_width must be positive"));
    KILN_CHECK(n.attr_i("sampling_ratio", 0) >= 0, cat(n.describe(), ": sampling_ratio must be >= 0"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    const auto& xs = ctx.input_shape(0);
    if (xs.rank_known && xs.rank() != 4) throw ctx.error("input X must have rank 4, got ", xs.to_string());
    ctx.set_output(0, ctx.input_dtype(0),
                   ir::PartialShape({dim_or_unknown(ctx.input_shape(1), 0), dim_or_unknown(xs, 1),
                                     n.attr_i("output_height", 1), n.attr_i("output_width", 1)}));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& X = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    const Tensor& bidx = ctx.input(2);
    if (!is_floating(X.dtype())) throw ctx.error("input X must be a floating point tensor");
    if (X.rank() != 4) throw ctx.error("input X must have rank 4, got ", shape_to_string(X.shape()));
    if (rois.rank() != 2 || rois.shape()[1] != 4)
      throw ctx.error("rois must have shape [num_rois, 4], got ", shape_to_string(rois.shape()));
    const int64_t R = rois.shape()[0];
    if (bidx.rank() != 1 || bidx.shape()[0] != R || !is_integral(bidx.dtype()))
      throw ctx.error("batch_indices must be an integer tensor of shape [", R, "], got ",
                      shape_to_string(bidx.shape()));
    const int64_t N = X.shape()[0], C = X.shape()[1], H = X.shape()[2], W = X.shape()[3];
    const int64_t ph_n = n.attr_i("output_height", 1), pw_n = n.attr_i("output_width", 1);
    const int64_t sampling = n.attr_i("sampling_ratio", 0);
    const double scale = n.attr_f("spatial_scale", 1.0f);
    const bool is_max = n.attr_s("mode", "avg") == "max";
    const bool half_pixel = roi_ctm(n) == "half_pixel";
    const std::vector<double> rv = load_f64(rois);
    const std::vector<int64_t> bi = bidx.to_i64();

    struct Tap {
      int64_t o1, o2, o3, o4;
      double w1, w2, w3, w4;
    };
    const double off = half_pixel ? 0.5 : 0.0;
    for (int64_t ri = 0; ri < R; ++ri) {  // checked first: the rois are then computed in parallel
      const int64_t b = bi[static_cast<size_t>(ri)];
      if (b < 0 || b >= N) throw ctx.error("batch index ", b, " is out of range [0, ", N, ")");
      const double* roi = rv.data() + ri * 4;
      const double sw = roi[0] * scale - off, sh = roi[1] * scale - off;
      const double rw = roi[2] * scale - off - sw, rh = roi[3] * scale - off - sh;
      if (!std::isfinite(rw) || !std::isfinite(rh) || !std::isfinite(sw) || !std::isfinite(sh))
        throw ctx.error("roi ", ri, " has non-finite coordinates");
    }
    const int64_t bins = ph_n * pw_n;
    // The bilinear taps of a bin's sample points (in double, as the definition), then its C
    // outputs. T: the element type the channels are computed in, over X channels-last (a tap's
    // four corners are then four runs of C values): float for an f32 X (16 lanes a vector, half
    // the memory), double otherwise. In float an average's taps are summed 64 at a time, each
    // group's sums then added in double: a bin of thousands of samples (adaptive sampling of a
    // large roi) stays within about 1e-6 of the double sum.
    auto compute = [&](auto zero, const auto& xt, auto* y) {
      using T = decltype(zero);
      constexpr size_t kGroup = 64;
      auto one_roi = [&](int64_t ri, std::vector<Tap>& taps, std::vector<T>& acc, std::vector<double>& total) {
        const int64_t b = bi[static_cast<size_t>(ri)];
        const double* roi = rv.data() + ri * 4;
        const double sw = roi[0] * scale - off, sh = roi[1] * scale - off;
        const double ew = roi[2] * scale - off, eh = roi[3] * scale - off;
        double rw = ew - sw, rh = eh - sh;
        if (!half_pixel) {
          rw = std::max(rw, 1.0);
          rh = std::max(rh, 1.0);
        }
        const double bin_h = rh / static_cast<double>(ph_n), bin_w = rw / static_cast<double>(pw_n);
        const int64_t gh = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rh / static_cast<double>(ph_n)));
        const int64_t gw = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rw / static_cast<double>(pw_n)));
        const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
        const T* image = xt.data() + b * H * W * C;
        for (int64_t ph = 0; ph < ph_n; ++ph) {
          for (int64_t pw = 0; pw < pw_n; ++pw) {
            taps.clear();
            for (int64_t iy = 0; iy < gh; ++iy) {
              const double yy = sh + static_cast<double>(ph) * bin_h +
                                (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(gh);
              for (int64_t ix = 0; ix < gw; ++ix) {
                const double xx = sw + static_cast<double>(pw) * bin_w +
                                  (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(gw);
                double yv = yy, xv = xx;
                if (yv < -1.0 || yv > static_cast<double>(H) || xv < -1.0 || xv > static_cast<double>(W)) {
                  taps.push_back({0, 0, 0, 0, 0, 0, 0, 0});
                  continue;
                }
                yv = std::max(yv, 0.0);
                xv = std::max(xv, 0.0);
                int64_t yl = static_cast<int64_t>(yv), xl = static_cast<int64_t>(xv), yhi, xhi;
                if (yl >= H - 1) {
                  yhi = yl = H - 1;
                  yv = static_cast<double>(yl);
                } else {
                  yhi = yl + 1;
                }
                if (xl >= W - 1) {
                  xhi = xl = W - 1;
                  xv = static_cast<double>(xl);
                } else {
                  xhi = xl + 1;
                }
                const double ly = yv - static_cast<double>(yl), lx = xv - static_cast<double>(xl);
                const double hy = 1 - ly, hx = 1 - lx;
                taps.push_back({yl * W + xl, yl * W + xhi, yhi * W + xl, yhi * W + xhi, hy * hx, hy * lx, ly * hx,
                                ly * lx});
              }
            }
            std::fill(acc.begin(), acc.end(), T(0));
            std::fill(total.begin(), total.end(), 0.0);
            for (size_t ti = 0; ti < taps.size(); ++ti) {
              const Tap& t = taps[ti];
              const T *p1 = image + t.o1 * C, *p2 = image + t.o2 * C, *p3 = image + t.o3 * C, *p4 = image + t.o4 * C;
              const T w1 = static_cast<T>(t.w1), w2 = static_cast<T>(t.w2), w3 = static_cast<T>(t.w3),
                      w4 = static_cast<T>(t.w4);
              if (is_max) {
                const bool first_tap = ti == 0;
                for (int64_t c = 0; c < C; ++c) {
                  const T m = std::max(std::max(std::max(w1 * p1[c], w2 * p2[c]), w3 * p3[c]), w4 * p4[c]);
                  acc[static_cast<size_t>(c)] = first_tap ? m : std::max(acc[static_cast<size_t>(c)], m);
                }
                continue;
              }
              for (int64_t c = 0; c < C; ++c) acc[static_cast<size_t>(c)] += w1 * p1[c] + w2 * p2[c] + w3 * p3[c] + w4 * p4[c];
              if (sizeof(T) < sizeof(double) && (ti + 1) % kGroup == 0 && ti + 1 < taps.size())
                for (int64_t c = 0; c < C; ++c) {
                  total[static_cast<size_t>(c)] += static_cast<double>(acc[static_cast<size_t>(c)]);
                  acc[static_cast<size_t>(c)] = T(0);
                }
            }
            auto* yr = y + ri * C * bins + ph * pw_n + pw;
            for (int64_t c = 0; c < C; ++c) {
              const double v = static_cast<double>(acc[static_cast<size_t>(c)]);
              yr[c * bins] = static_cast<T>(is_max ? v : (total[static_cast<size_t>(c)] + v) / count);
            }
          }
        }
      };
#pragma omp parallel if (R * C * bins > 32768)
      {
        std::vector<Tap> taps;
        std::vector<T> acc(static_cast<size_t>(C));
        std::vector<double> total(static_cast<size_t>(C));
#pragma omp for schedule(dynamic)
        for (int64_t ri = 0; ri < R; ++ri) one_roi(ri, taps, acc, total);
      }
    };
    // X channels-last (every channel of a bin computed at once, each with the same operations
    // as one at a time)
    auto channels_last = [&](const auto* x, auto& xt) {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t p = 0; p < H * W; ++p)
            xt[static_cast<size_t>((n * H * W + p) * C + c)] = x[static_cast<size_t>((n * C + c) * H * W + p)];
    };
    if (X.dtype() == DType::f32) {
      std::vector<float> xt(static_cast<size_t>(N * C * H * W));
      channels_last(static_cast<const float*>(X.raw()), xt);
      Tensor& out = ctx.allocate_output_unzeroed(0, DType::f32, {R, C, ph_n, pw_n});
      compute(0.0f, xt, static_cast<float*>(out.raw()));
      return;
    }
    std::vector<double> xt(static_cast<size_t>(N * C * H * W));
    {
      const std::vector<double> x = load_f64(X);  // NCHW, let go once transposed
      channels_last(x.data(), xt);
    }
    std::vector<double> y(static_cast<size_t>(R * C * ph_n * pw_n), 0.0);
    compute(0.0, xt, y.data());
    Tensor& out = ctx.allocate_output(0, X.dtype(), {R, C, ph_n, pw_n});
    misc_store_f64(out, y, "RoiAlign");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------- GridSample

enum class Pad { zeros, border, reflection };

// Reflects x into [lo, hi] given as twice the bounds (PyTorch's reflect_coordinates).
double reflect(double x, double twice_lo, double twice_hi) {
  if (twice_lo == twice_hi) return 0;
  const double mn = twice_lo / 2, span = (twice_hi - twice_lo) / 2;
  x = std::fabs(x - mn);
  const double extra = std::fmod(x, span);
  const double flips = std::floor(x / span);
  return std::fmod(flips, 2.0) == 0 ? extra + mn : span - extra + mn;
}

double unnormalize(double c, int64_t size, bool align) {
  return align ? (c + 1) / 2 * static_cast<double>(size - 1) : ((c + 1) * static_cast<double>(size) - 1) / 2;
}

// Applies the padding mode to a source coordinate (border: clip; reflection: reflect + clip).
double apply_padding(double c, int64_t size, Pad pad, bool align) {
  const double hi = static_cast<double>(size - 1);
  if (pad == Pad::border) {
    c = std::clamp(c, 0.0, hi);
  } else if (pad == Pad::reflection) {
    c = align ? reflect(c, 0, 2 * hi) : reflect(c, -1, 2 * static_cast<double>(size) - 1);
    c = std::clamp(c, 0.0, hi);
  }
  return c;
}

double cubic1(double x, double A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }         // |x| <= 1
double cubic2(double x, double A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }  // 1 < |x| < 2

// GridSample (16, 20, 22): samples X [N, C, D1..Dr] at the grid's points [N, O1..Or, r]
// (coordinates in [-1, 1], last dim in x, y, z order: reversed spatial dims). Opset 20 made it
// N-d and renamed the modes linear / cubic (opset 16's bilinear / bicubic are the same); cubic
// is 2-D only.
std::string gridsample_mode(const ir::Node& n) {
  std::string m = n.attr_s("mode", n.opset() >= 20 ? "linear" : "bilinear");
  if (m == "bilinear") m = "linear";
  if (m == "bicubic") m = "cubic";
  return m;
}

void register_gridsample(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "GridSample";
  s.since_version = 16;
  s.max_version = 22;
  s.min_inputs = 2;
  s.max_inputs = 2;
  s.attrs = {{"align_corners", ir::AttrType::i}, {"mode", ir::AttrType::s}, {"padding_mode", ir::AttrType::s}};
  s.validate = [](const ir::Node& n) {
    const std::string m = gridsample_mode(n);
    KILN_CHECK(m == "linear" || m == "nearest" || m == "cubic",
               cat(n.describe(), ": attribute 'mode' must be linear, nearest or cubic (bilinear, bicubic before opset ",
                   "20), got '", n.attr_s("mode", ""), "'"));
    std::string p = n.attr_s("padding_mode", "zeros");
    KILN_CHECK(p == "zeros" || p == "border" || p == "reflection",
               cat(n.describe(), ": attribute 'padding_mode' must be zeros, border or reflection, got '", p, "'"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const auto& xs = ctx.input_shape(0);
    const auto& gs = ctx.input_shape(1);
    const size_t rank = xs.rank_known ? xs.rank() : gs.rank_known ? gs.rank() : 0;
    if (rank == 0) return ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape::unknown_rank());
    if (rank < 3) throw ctx.error("input X must have rank >= 3 (N, C, spatial...), got ", xs.to_string());
    if (xs.rank_known && gs.rank_known && gs.rank() != xs.rank())
      throw ctx.error("grid must have the rank of X (", xs.rank(), "), got ", gs.to_string());
    if (gridsample_mode(ctx.node()) == "cubic" && rank != 4)
      throw ctx.error("mode cubic samples 2-D images (rank-4 X) only, got rank ", rank);
    ir::Dim nd = dim_or_unknown(xs, 0);
    if (!nd.is_static()) nd = dim_or_unknown(gs, 0);
    std::vector<ir::Dim> out = {nd, dim_or_unknown(xs, 1)};
    for (size_t i = 1; i + 1 < rank; ++i) out.push_back(dim_or_unknown(gs, i));
    ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& X = ctx.input(0);
    const Tensor& G = ctx.input(1);
    const size_t rank = X.rank();
    if (rank < 3) throw ctx.error("input X must have rank >= 3 (N, C, spatial...), got ", shape_to_string(X.shape()));
    const size_t r = rank - 2;  // spatial dims
    if (!is_floating(G.dtype())) throw ctx.error("input grid must be a floating point tensor");
    if (G.rank() != rank || G.shape()[rank - 1] != static_cast<int64_t>(r) || G.shape()[0] != X.shape()[0])
      throw ctx.error("grid must have shape [", X.shape()[0], ", out spatial (", r, " dims), ", r, "], got ",
                      shape_to_string(G.shape()));
    const std::string mode = gridsample_mode(n);
    if (mode == "cubic" && r != 2) throw ctx.error("mode cubic samples 2-D images (rank-4 X) only");
    const std::string pm = n.attr_s("padding_mode", "zeros");
    const Pad pad = pm == "border" ? Pad::border : pm == "reflection" ? Pad::reflection : Pad::zeros;
    const bool align = n.attr_i("align_corners", 0) != 0;
    const int64_t N = X.shape()[0], C = X.shape()[1];
    std::vector<int64_t> in(r), out(r), stride(r);
    int64_t in_size = 1, out_size = 1;
    for (size_t i = r; i-- > 0;) {
      in[i] = X.shape()[2 + i];
      out[i] = G.shape()[1 + i];
      stride[i] = in_size;
      in_size *= in[i];
      out_size *= out[i];
    }
    const std::vector<double> x = load_f64(X), g = load_f64(G);
    std::vector<double> y(static_cast<size_t>(N * C * out_size), 0.0);
    // the value at integer coordinates (spatial order), 0 outside
    auto at = [&](const double* plane, const int64_t* c) -> double {
      int64_t off = 0;
      for (size_t i = 0; i < r; ++i) {
        if (c[i] < 0 || c[i] >= in[i]) return 0.0;
        off += c[i] * stride[i];
      }
      return plane[off];
    };
    std::vector<double> src(r);
    std::vector<int64_t> cc(r), lo(r);
    std::vector<double> frac(r);
    for (int64_t b = 0; b < N; ++b) {
      for (int64_t o = 0; o < out_size; ++o) {
        const double* gp = g.data() + (b * out_size + o) * static_cast<int64_t>(r);
        // grid coordinate k is spatial dim r-1-k (x first)
        for (size_t i = 0; i < r; ++i) src[i] = unnormalize(gp[r - 1 - i], in[i], align);
        if (mode != "cubic")
          for (size_t i = 0; i < r; ++i) src[i] = apply_padding(src[i], in[i], pad, align);
        for (int64_t c = 0; c < C; ++c) {
          const double* plane = x.data() + (b * C + c) * in_size;
          double v = 0;
          if (mode == "nearest") {
            for (size_t i = 0; i < r; ++i) cc[i] = safe_floor(std::nearbyint(src[i]));
            v = at(plane, cc.data());
          } else if (mode == "linear") {
            for (size_t i = 0; i < r; ++i) {
              const double f = std::floor(src[i]);
              lo[i] = safe_floor(f);
              frac[i] = src[i] - f;
            }
            for (uint32_t corner = 0; corner < (1u << r); ++corner) {
              double w = 1;
              for (size_t i = 0; i < r; ++i) {
                const bool up = (corner >> i) & 1u;
                cc[i] = lo[i] + up;
                w *= up ? frac[i] : 1 - frac[i];
              }
              if (w != 0) v += w * at(plane, cc.data());
            }
          } else {  // cubic, 2-D: every tap read through the padding mode
            const double iy = src[0], ix = src[1];
            const double fx = std::floor(ix), fy = std::floor(iy);
            const double tx = ix - fx, ty = iy - fy;
            const double A = -0.75;
            const double wx[4] = {cubic2(tx + 1, A), cubic1(tx, A), cubic1(1 - tx, A), cubic2(2 - tx, A)};
            const double wy[4] = {cubic2(ty + 1, A), cubic1(ty, A), cubic1(1 - ty, A), cubic2(2 - ty, A)};
            const int64_t x0 = safe_floor(fx) - 1, y0 = safe_floor(fy) - 1;
            for (int64_t i = 0; i < 4; ++i) {
              double row = 0;
              for (int64_t j = 0; j < 4; ++j) {
                int64_t p[2] = {y0 + i, x0 + j};
                if (pad != Pad::zeros) {
                  p[0] = safe_floor(apply_padding(static_cast<double>(p[0]), in[0], pad, align));
                  p[1] = safe_floor(apply_padding(static_cast<double>(p[1]), in[1], pad, align));
                }
                row += wx[j] * at(plane, p);
              }
              v += wy[i] * row;
            }
          }
          y[static_cast<size_t>((b * C + c) * out_size + o)] = v;
        }
      }
    }
    Shape os = {N, C};
    os.insert(os.end(), out.begin(), out.end());
    Tensor& result = ctx.allocate_output(0, X.dtype(), os);
    misc_store_f64(result, y, "GridSample");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------- AffineGrid

// AffineGrid (20): theta [N, 2, 3] (or [N, 3, 4]) applied to the base grid of an image of size
// [N, C, H, W] (or [N, C, D, H, W]): the output [N, H, W, 2] (or [N, D, H, W, 3]) holds, per
// position, theta * (x, y[, z], 1) with x along W. The base coordinates span [-1, 1]: the
// pixel centres ((2i + 1) / L - 1), or the corner pixels themselves with align_corners.
void register_affine_grid(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "AffineGrid";
  s.since_version = 20;
  s.max_version = 20;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"align_corners", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& th = ctx.input_shape(0);
    std::vector<int64_t> size;
    const Tensor* c = ctx.input_constant(1);
    if (c) size = c->to_i64();
    if (!c || (size.size() != 4 && size.size() != 5)) {
      const ir::PartialShape& ss = ctx.input_shape(1);
      if (ss.rank_known && ss.rank() == 1 && ss.dims[0].is_static() && (ss.dims[0].value == 4 || ss.dims[0].value == 5)) {
        const size_t r = static_cast<size_t>(ss.dims[0].value);
        return ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape(std::vector<ir::Dim>(r, ir::Dim::unknown())));
      }
      return ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape::unknown_rank());
    }
    std::vector<ir::Dim> out = {th.rank_known ? th.dims[0] : ir::Dim(size[0])};
    for (size_t i = 2; i < size.size(); ++i) out.emplace_back(size[i]);
    out.emplace_back(static_cast<int64_t>(size.size() - 2));
    ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& theta = ctx.input(0);
    const std::vector<int64_t> size = ctx.input(1).to_i64();
    if (size.size() != 4 && size.size() != 5)
      throw ctx.error("size must be [N, C, H, W] or [N, C, D, H, W], got [", join(size), "]");
    const size_t r = size.size() - 2;  // spatial dims
    const int64_t N = size[0];
    if (theta.shape() != Shape{N, static_cast<int64_t>(r), static_cast<int64_t>(r + 1)})
      throw ctx.error("theta must be [", N, ", ", r, ", ", r + 1, "] for size [", join(size), "], got ",
                      shape_to_string(theta.shape()));
    const bool align = ctx.node().attr_i("align_corners", 0) != 0;
    auto base = [&](int64_t i, int64_t len) {
      if (len <= 1) return 0.0;
      return align ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1)
                   : (2.0 * static_cast<double>(i) + 1) / static_cast<double>(len) - 1;
    };
    const std::vector<double> t = theta.to_f64();
    Shape os = {N};
    int64_t points = 1;
    for (size_t i = 2; i < size.size(); ++i) {
      if (size[i] < 0) throw ctx.error("size [", join(size), "] has a negative entry");
      os.push_back(size[i]);
      points *= size[i];
    }
    os.push_back(static_cast<int64_t>(r));
    std::vector<double> y(static_cast<size_t>(N * points) * r);
    std::vector<double> p(r + 1, 1.0);
    for (int64_t b = 0; b < N; ++b)
      for (int64_t q = 0; q < points; ++q) {
        // coordinate k of the point is spatial dim r-1-k (x first)
        int64_t rem = q;
        for (size_t d = r; d-- > 0;) {
          const int64_t len = size[2 + d];
          p[r - 1 - d] = base(rem % len, len);
          rem /= len;
        }
        for (size_t k = 0; k < r; ++k) {
          double acc = 0;
          for (size_t j = 0; j <= r; ++j) acc += t[static_cast<size_t>(b) * r * (r + 1) + k * (r + 1) + j] * p[j];
          y[static_cast<size_t>(b * points + q) * r + k] = acc;
        }
      }
    misc_store_f64(ctx.allocate_output(0, theta.dtype(), os), y, "AffineGrid");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------- DeformConv

// DeformConv (19, 22), 2-D: a convolution whose every tap reads X at its regular position plus
// a learned offset (bilinear interpolation, 0 outside the image), scaled by an optional mask.
// offset [N, offset_group * 2 * kH * kW, oH, oW] holds (dy, dx) per tap; mask [N,
// offset_group * kH * kW, oH, oW]; channels are split into offset_group groups for both.
void register_deform_conv(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "DeformConv";
  s.since_version = 19;
  s.max_version = 22;
  s.min_inputs = 3;
  s.max_inputs = 5;
  s.attrs = {{"dilations", ir::AttrType::ints}, {"group", ir::AttrType::i},      {"kernel_shape", ir::AttrType::ints},
             {"offset_group", ir::AttrType::i}, {"pads", ir::AttrType::ints},    {"strides", ir::AttrType::ints}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& xs = ctx.input_shape(0);
    const ir::PartialShape& ws = ctx.input_shape(1);
    const ir::PartialShape& os = ctx.input_shape(2);
    if (xs.rank_known && xs.rank() != 4) throw ctx.error("X must be 4-D [N, C, H, W] (2-D DeformConv), got ", xs.to_string());
    std::vector<ir::Dim> out = {xs.rank_known ? xs.dims[0] : ir::Dim::unknown(),
                                ws.rank_known ? ws.dims[0] : ir::Dim::unknown(), ir::Dim::unknown(), ir::Dim::unknown()};
    if (os.rank_known && os.rank() == 4) out[2] = os.dims[2], out[3] = os.dims[3];
    ctx.set_output(0, ctx.input_dtype(0), ir::PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& X = ctx.input(0);
    const Tensor& W = ctx.input(1);
    const Tensor& O = ctx.input(2);
    const Tensor* Bt = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    const Tensor* M = ctx.has_input(4) ? &ctx.input(4) : nullptr;
    if (X.rank() != 4 || W.rank() != 4) throw ctx.error("X and W must be 4-D (2-D DeformConv)");
    const int64_t N = X.shape()[0], C = X.shape()[1], H = X.shape()[2], Wd = X.shape()[3];
    const int64_t oC = W.shape()[0], kH = W.shape()[2], kW = W.shape()[3];
    const int64_t group = n.attr_i("group", 1), og = n.attr_i("offset_group", 1);
    if (group < 1 || og < 1 || C % group || oC % group || C % og || W.shape()[1] != C / group)
      throw ctx.error("channels: X has ", C, ", W ", shape_to_string(W.shape()), ", group ", group, ", offset_group ", og);
    auto ints = [&](const char* name, int64_t dflt, size_t count) {
      auto v = n.attr_ints(name, std::vector<int64_t>(count, dflt));
      if (v.size() != count) throw ctx.error("attribute '", name, "' has ", v.size(), " values, expected ", count);
      return v;
    };
    const auto ks = ints("kernel_shape", 0, 2);
    if (n.has_attr("kernel_shape") && (ks[0] != kH || ks[1] != kW))
      throw ctx.error("kernel_shape [", join(ks), "] does not match W ", shape_to_string(W.shape()));
    const auto st = ints("strides", 1, 2), dl = ints("dilations", 1, 2), pd = ints("pads", 0, 4);
    const int64_t oH = (H + pd[0] + pd[2] - (dl[0] * (kH - 1) + 1)) / st[0] + 1;
    const int64_t oW = (Wd + pd[1] + pd[3] - (dl[1] * (kW - 1) + 1)) / st[1] + 1;
    if (oH <= 0 || oW <= 0) throw ctx.error("the kernel does not fit the padded input");
    const int64_t K = kH * kW;
    if (O.shape() != Shape{N, og * 2 * K, oH, oW})
      throw ctx.error("offset must be [", N, ", ", og * 2 * K, ", ", oH, ", ", oW, "], got ", shape_to_string(O.shape()));
    if (M && M->shape() != Shape{N, og * K, oH, oW})
      throw ctx.error("mask must be [", N, ", ", og * K, ", ", oH, ", ", oW, "], got ", shape_to_string(M->shape()));
    if (Bt && Bt->shape() != Shape{oC}) throw ctx.error("B must be [", oC, "], got ", shape_to_string(Bt->shape()));
    const std::vector<double> x = X.to_f64(), w = W.to_f64(), off = O.to_f64();
    const std::vector<double> m = M ? M->to_f64() : std::vector<double>(), bias = Bt ? Bt->to_f64() : std::vector<double>();
    auto sample = [&](const double* plane, double py, double px) {
      if (py <= -1 || py >= static_cast<double>(H) || px <= -1 || px >= static_cast<double>(Wd)) return 0.0;
      const double fy = std::floor(py), fx = std::floor(px);
      const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
      const double ly = py - fy, lx = px - fx;
      auto at = [&](int64_t yy, int64_t xx) { return yy >= 0 && yy < H && xx >= 0 && xx < Wd ? plane[yy * Wd + xx] : 0.0; };
      return (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x0 + 1)) + ly * ((1 - lx) * at(y0 + 1, x0) + lx * at(y0 + 1, x0 + 1));
    };
    const int64_t cpg = C / group, opg = oC / group, cpo = C / og;
    std::vector<double> y(static_cast<size_t>(N * oC * oH * oW), 0.0);
    std::vector<double> col(static_cast<size_t>(C * K));  // sampled input per output position
    for (int64_t b = 0; b < N; ++b)
      for (int64_t oh = 0; oh < oH; ++oh)
        for (int64_t ow = 0; ow < oW; ++ow) {
          for (int64_t c = 0; c < C; ++c) {
            const int64_t g = c / cpo;
            const double* plane = x.data() + (b * C + c) * H * Wd;
            for (int64_t i = 0; i < kH; ++i)
              for (int64_t j = 0; j < kW; ++j) {
                const int64_t k = i * kW + j;
                const size_t oi = static_cast<size_t>(((b * og + g) * 2 * K + 2 * k) * oH * oW + oh * oW + ow);
                const double dy = off[oi], dx = off[oi + static_cast<size_t>(oH * oW)];
                const double py = static_cast<double>(oh * st[0] - pd[0] + i * dl[0]) + dy;
                const double px = static_cast<double>(ow * st[1] - pd[1] + j * dl[1]) + dx;
                double v = sample(plane, py, px);
                if (M) v *= m[static_cast<size_t>(((b * og + g) * K + k) * oH * oW + oh * oW + ow)];
                col[static_cast<size_t>(c * K + k)] = v;
              }
          }
          for (int64_t o = 0; o < oC; ++o) {
            const int64_t g = o / opg;
            double acc = Bt ? bias[static_cast<size_t>(o)] : 0.0;
            for (int64_t c = 0; c < cpg; ++c)
              for (int64_t k = 0; k < K; ++k)
                acc += w[static_cast<size_t>((o * cpg + c) * K + k)] * col[static_cast<size_t>((g * cpg + c) * K + k)];
            y[static_cast<size_t>(((b * oC + o) * oH + oh) * oW + ow)] = acc;
          }
        }
    misc_store_f64(ctx.allocate_output(0, X.dtype(), {N, oC, oH, oW}), y, "DeformConv");
  };
  r.add(std::move(s));
}

}  // namespace

void register_misc_vision_ops(ir::OpRegistry& r) {
  register_affine_grid(r);
  register_deform_conv(r);
  register_nms(r);
  register_roialign(r);
  register_gridsample(r);
}

}  // namespace kiln::ops
