// MaxRoiPool (opset 1, 22): Fast R-CNN region pooling. Each region of interest
// [batch, x1, y1, x2, y2] (input coordinates, times spatial_scale, rounded) is cut into
// pooled_shape bins, and each bin gives the max of the input over it (0 for an empty bin).
// Bin (ph, pw) covers rows floor(ph * h / PH) .. ceil((ph + 1) * h / PH) of the region, where the
// region is h = max(y2 - y1 + 1, 1) rows high, clipped to the input.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"

namespace kiln::ops {

void misc_store_f64(Tensor& t, const std::vector<double>& v, const char* what);  // misc.cpp
void register_max_roi_pool(ir::OpRegistry& r);

void register_max_roi_pool(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "MaxRoiPool";
  s.since_version = 1;
  s.max_version = 22;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"pooled_shape", ir::AttrType::ints, true}, {"spatial_scale", ir::AttrType::f}};
  s.validate = [](const ir::Node& n) {
    const auto& ps = n.attr_ints("pooled_shape");
    KILN_CHECK(ps.size() == 2 && ps[0] > 0 && ps[1] > 0,
               cat(n.describe(), ": pooled_shape must be two positive sizes, got [", join(ps), "]"));
    const float sc = n.attr_f("spatial_scale", 1.0f);
    KILN_CHECK(std::isfinite(sc) && sc > 0, cat(n.describe(), ": spatial_scale must be positive, got ", sc));
  };
  s.infer = [](ir::InferContext& ctx) {
    const auto& xs = ctx.input_shape(0);
    const auto& rs = ctx.input_shape(1);
    if (xs.rank_known && xs.rank() != 4) throw ctx.error("X must be [N, C, H, W], got ", xs.to_string());
    if (rs.rank_known && (rs.rank() != 2 || (rs.dims[1].is_static() && rs.dims[1].value != 5)))
      throw ctx.error("rois must be [num_rois, 5], got ", rs.to_string());
    const auto& ps = ctx.node().attr_ints("pooled_shape");
    ctx.set_output(0, ctx.input_dtype(0),
                   ir::PartialShape({dim_or_unknown(rs, 0), dim_or_unknown(xs, 1), ir::Dim(ps[0]), ir::Dim(ps[1])}));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& X = ctx.input(0);
    const Tensor& R = ctx.input(1);
    if (!is_floating(X.dtype()) || R.dtype() != X.dtype())
      throw ctx.error("X and rois must be float tensors of one type, got ", dtype_name(X.dtype()), " and ",
                      dtype_name(R.dtype()));
    if (X.rank() != 4) throw ctx.error("X must be [N, C, H, W], got ", shape_to_string(X.shape()));
    if (R.rank() != 2 || R.shape()[1] != 5) throw ctx.error("rois must be [num_rois, 5], got ", shape_to_string(R.shape()));
    const int64_t N = X.shape()[0], C = X.shape()[1], H = X.shape()[2], W = X.shape()[3], nr = R.shape()[0];
    const int64_t PH = n.attr_ints("pooled_shape")[0], PW = n.attr_ints("pooled_shape")[1];
    const double scale = n.attr_f("spatial_scale", 1.0f);
    const std::vector<double> x = X.to_f64(), rois = R.to_f64();
    std::vector<double> y(static_cast<size_t>(nr * C * PH * PW), 0.0);
    auto clip = [](int64_t v, int64_t hi) { return std::min(std::max<int64_t>(v, 0), hi); };
    for (int64_t r = 0; r < nr; ++r) {
      const double* roi = &rois[static_cast<size_t>(r * 5)];
      if (!(roi[0] >= 0 && roi[0] < static_cast<double>(N)))
        throw ctx.error("roi ", r, " names batch ", roi[0], ", X has ", N);
      for (int k = 1; k < 5; ++k)
        if (!std::isfinite(roi[k]) || std::fabs(roi[k] * scale) > 1e15) throw ctx.error("roi ", r, " has a non-finite or huge coordinate");
      const int64_t b = static_cast<int64_t>(roi[0]);
      const int64_t x1 = std::llround(roi[1] * scale), y1 = std::llround(roi[2] * scale);
      const int64_t x2 = std::llround(roi[3] * scale), y2 = std::llround(roi[4] * scale);
      const double bin_h = static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(PH);
      const double bin_w = static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(PW);
      for (int64_t c = 0; c < C; ++c) {
        const double* plane = &x[static_cast<size_t>((b * C + c) * H * W)];
        for (int64_t ph = 0; ph < PH; ++ph) {
          const int64_t hs = clip(static_cast<int64_t>(std::floor(static_cast<double>(ph) * bin_h)) + y1, H);
          const int64_t he = clip(static_cast<int64_t>(std::ceil(static_cast<double>(ph + 1) * bin_h)) + y1, H);
          for (int64_t pw = 0; pw < PW; ++pw) {
            const int64_t ws = clip(static_cast<int64_t>(std::floor(static_cast<double>(pw) * bin_w)) + x1, W);
            const int64_t we = clip(static_cast<int64_t>(std::ceil(static_cast<double>(pw + 1) * bin_w)) + x1, W);
            double m = -std::numeric_limits<double>::infinity();
            for (int64_t h = hs; h < he; ++h)
              for (int64_t w = ws; w < we; ++w) m = std::max(m, plane[h * W + w]);
            y[static_cast<size_t>(((r * C + c) * PH + ph) * PW + pw)] = (he <= hs || we <= ws) ? 0.0 : m;
          }
        }
      }
    }
    misc_store_f64(ctx.allocate_output(0, X.dtype(), {nr, C, PH, PW}), y, "MaxRoiPool");
  };
  r.add(std::move(s));
}

}  // namespace kiln::ops
