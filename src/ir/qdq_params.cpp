#include "ir/qdq_params.hpp"

#include <cmath>

#include "core/strings.hpp"

namespace kiln::ir {

std::optional<QdqParams> read_qdq_params(const Node& n, const PartialShape& xs, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<QdqParams> {
    *why = std::move(reason);
    return std::nullopt;
  };
  QdqParams p;
  p.scale = n.input(1);
  p.zero_point = n.input(2);
  const Value *s = p.scale, *z = p.zero_point;
  if (!s || !s->is_constant()) return fail(cat("the ", n.op_type(), " scale is not a constant"));
  if (s->constant().dtype() != DType::f32)  // f16 / bf16 scales mean f16 / bf16 outputs (opset 19)
    return fail(cat("the ", n.op_type(), " scale is ", dtype_name(s->constant().dtype()), ", not float32"));
  if (n.attr_i("block_size", 0) != 0 || n.has_attr("output_dtype"))  // opset 21 forms
    return fail(cat("the ", n.op_type(), n.attr_i("block_size", 0) != 0 ? " is blocked" : " has output_dtype"));
  p.scales = s->constant().to_f64();
  for (double v : p.scales)
    if (!(v > 0) || !std::isfinite(v))
      return fail(cat("the ", n.op_type(), " scale holds ", v, " (only positive finite scales are converted)"));
  if (z) {
    if (!z->is_constant()) return fail(cat("the ", n.op_type(), " zero point is not a constant"));
    p.zp_type = z->constant().dtype();
    p.zero_points = z->constant().to_i64();
    if (p.zero_points.size() != p.scales.size())
      return fail(cat("the ", n.op_type(), " scale and zero point differ in size"));
  } else {
    p.zero_points.assign(p.scales.size(), 0);
  }
  const Shape& ss = s->constant().shape();
  if (p.scales.size() == 1 && ss.size() <= 1) return p;  // per tensor
  if (ss.size() != 1) return fail(cat("the ", n.op_type(), " scale has shape ", shape_to_string(ss)));
  if (!xs.rank_known || xs.rank() == 0)
    return fail(cat("the ", n.op_type(), " is per axis and the rank of X is unknown"));
  const int64_t rank = static_cast<int64_t>(xs.rank());
  const int64_t axis = n.attr_i("axis", 1);
  if (axis < -rank || axis >= rank)
    return fail(cat("the ", n.op_type(), " axis ", axis, " is out of range for rank ", rank));
  p.axis = axis < 0 ? axis + rank : axis;
  const Dim& d = xs.dims[static_cast<size_t>(p.axis)];
  if (d.is_static() && d.value != static_cast<int64_t>(p.scales.size()))
    return fail(cat("the ", n.op_type(), " has ", p.scales.size(), " scales for dim ", p.axis, " of size ", d.value));
  return p;
}

}  // namespace kiln::ir
