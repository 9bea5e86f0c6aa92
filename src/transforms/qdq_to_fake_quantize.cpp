#include "transforms/qdq_to_fake_quantize.hpp"

#include <cmath>

#include "core/strings.hpp"
#include "ir/infer_util.hpp"
#include "transforms/graph_edit.hpp"
#include "ir/qdq_params.hpp"

namespace kiln::transforms {

namespace {

// Scale and zero point of a QuantizeLinear or DequantizeLinear (qdq_params.hpp), u8 / s8.
struct QParams {
  std::vector<double> scale;
  std::vector<int64_t> zp;
  DType zp_type = DType::undefined;  // undefined: no zero point given
  int64_t axis = -1;                 // -1: per tensor
  std::string reason;                // non-empty: not usable, and why
};

QParams read_params(const ir::Node& n, const ir::PartialShape& xs) {
  QParams p;
  const std::optional<ir::QdqParams> r = ir::read_qdq_params(n, xs, &p.reason);
  if (!r) return p;
  if (r->zp_type != DType::undefined && r->zp_type != DType::u8 && r->zp_type != DType::i8) {
    p.reason = cat("the ", n.op_type(), " zero point is ", dtype_name(r->zp_type), ", not uint8 or int8");
    return p;
  }
  p.scale = r->scales;
  p.zp = r->zero_points;
  p.zp_type = r->zp_type;
  p.axis = r->axis;
  return p;
}

// (q - zp) * scale for q = qmin and q = qmax, per parameter.
std::pair<std::vector<double>, std::vector<double>> range_of(const QParams& p, double qmin, double qmax) {
  std::vector<double> lo(p.scale.size()), hi(p.scale.size());
  for (size_t i = 0; i < p.scale.size(); ++i) {
    lo[i] = (qmin - static_cast<double>(p.zp[i])) * p.scale[i];
    hi[i] = (qmax - static_cast<double>(p.zp[i])) * p.scale[i];
  }
  return {lo, hi};
}

// Shape that broadcasts the parameters along their axis of a rank-`rank` tensor.
Shape range_shape(const QParams& p, size_t rank) {
  if (p.axis < 0) return {};
  Shape s{static_cast<int64_t>(p.scale.size())};
  for (size_t i = static_cast<size_t>(p.axis) + 1; i < rank; ++i) s.push_back(1);
  return s;
}

}  // namespace

size_t fuse_qdq_to_fake_quantize(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* q : g.topo_order()) {
    if (ed.erased(q) || q->op_type() != "QuantizeLinear" || !is_onnx_domain(*q) || !q->input(0)) continue;
    std::string where = q->name();
    auto skip = [&](const std::string& reason) {
      if (log) log->skipped(kQdqToFakeQuantize, where, "QuantizeLinear -> DequantizeLinear not converted: " + reason);
    };
    ir::Value* x = q->input(0);
    if (x->is_constant()) {
      skip(cat("its input '", x->name(), "' is a constant (weight QDQ is left to constant folding)"));
      continue;
    }
    ir::Value* qy = q->output(0);
    if (g.is_output(qy)) {
      skip(cat("the QuantizeLinear output '", qy->name(), "' is a graph output"));
      continue;
    }
    if (qy->uses().size() != 1) {
      skip(cat("the QuantizeLinear output is read by ", qy->uses().size(), " nodes"));
      continue;
    }
    ir::Node* dq = qy->uses()[0].node;
    if (dq->op_type() != "DequantizeLinear" || !is_onnx_domain(*dq) || qy->uses()[0].input_index != 0) {
      skip(cat("the QuantizeLinear output is read by ", dq->op_type(), " '", dq->name(), "', not a DequantizeLinear"));
      continue;
    }
    where = cat(q->name(), " -> ", dq->name());
    if (x->type.dtype != DType::f32) {
      skip(cat("X is ", dtype_name(x->type.dtype), ", not f32"));
      continue;
    }
    QParams qp = read_params(*q, x->type.shape);
    QParams dp = qp.reason.empty() ? read_params(*dq, x->type.shape) : QParams{};
    std::string reason = !qp.reason.empty() ? qp.reason : dp.reason;
    const DType qtype = qp.zp_type == DType::undefined ? DType::u8 : qp.zp_type;
    if (reason.empty() && dp.zp_type != DType::undefined && dp.zp_type != qtype)
      reason = cat("the DequantizeLinear zero point is ", dtype_name(dp.zp_type), " but the quantised type is ",
                   dtype_name(qtype));
    if (reason.empty() && qp.axis >= 0 && dp.axis >= 0 && qp.axis != dp.axis)
      reason = cat("the QuantizeLinear is per axis ", qp.axis, " and the DequantizeLinear per axis ", dp.axis);
    if (!reason.empty()) {
      skip(reason);
      continue;
    }
    const double qmin = qtype == DType::u8 ? 0 : -128, qmax = qtype == DType::u8 ? 255 : 127;
    const size_t rank = x->type.shape.rank_known ? x->type.shape.rank() : 0;
    auto [il, ih] = range_of(qp, qmin, qmax);
    auto [ol, oh] = range_of(dp, qmin, qmax);
    const std::string base = q->name();
    ir::Value* vil = add_f32_constant(g, base + "_input_low", il, range_shape(qp, rank));
    ir::Value* vih = add_f32_constant(g, base + "_input_high", ih, range_shape(qp, rank));
    ir::Value* vol = add_f32_constant(g, base + "_output_low", ol, range_shape(dp, rank));
    ir::Value* voh = add_f32_constant(g, base + "_output_high", oh, range_shape(dp, rank));
    if (!g.opset_imports.count("kiln")) g.opset_imports["kiln"] = 1;
    ir::Node* fq = g.add_node("FakeQuantize", {x, vil, vih, vol, voh}, 1, g.unique_name(q->name() + "_fq"), "kiln");
    fq->attrs["levels"] = ir::Attribute(int64_t{256});
    ir::Value* dy = dq->output(0);
    fq->output(0)->type = dy->type;
    const std::string fq_name = fq->name();
    ed.replace_and_erase(dq, dy, fq->output(0));
    ed.erase(q);
    ++count;
    if (log)
      log->applied(kQdqToFakeQuantize, where,
                   cat("replaced by FakeQuantize '", fq_name, "' (levels 256, ", dtype_name(qtype), ", ",
                       qp.axis < 0 && dp.axis < 0 ? "per tensor" : "per axis", ")"));
  }
  return count;
}

}  // namespace kiln::transforms
