#include "transforms/fold_pad.hpp"

#include <algorithm>
#include <cmath>

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// The Pad's full begin/end pads ([b0..b(r-1), e0..e(r-1)]) and its value; `reason` is
// non-empty when they are not known constants.
struct PadInfo {
  std::vector<int64_t> pads;
  double value = 0;
  std::string reason;
};

PadInfo read_pad(const ir::Node& pad) {
  PadInfo info;
  const std::string mode = pad.attr_s("mode", "constant");
  if (mode != "constant") {
    info.reason = cat("its mode is ", mode, ", not constant");
    return info;
  }
  std::vector<int64_t> pads;
  if (const ir::Value* p = pad.input(1)) {
    if (!p->is_constant()) {
      info.reason = cat("its pads '", p->name(), "' are not a constant");
      return info;
    }
    pads = p->constant().to_i64();
  } else {
    pads = pad.attr_ints("pads", {});
  }
  if (const ir::Value* v = pad.input(2)) {
    if (!v->is_constant()) {
      info.reason = cat("its constant_value '", v->name(), "' is not a constant");
      return info;
    }
    if (v->constant().size() > 1) {
      info.reason = "its constant_value holds more than one value";
      return info;
    }
    if (v->constant().size() == 1) info.value = v->constant().to_f64()[0];
  } else {
    info.value = pad.attr_f("value", 0.0f);
  }
  const ir::PartialShape& xs = pad.input(0)->type.shape;
  if (!xs.rank_known) {
    info.reason = "the rank of its input is unknown";
    return info;
  }
  const int64_t rank = static_cast<int64_t>(xs.rank());
  if (const ir::Value* ax = pad.input(3)) {
    if (!ax->is_constant()) {
      info.reason = cat("its axes '", ax->name(), "' are not a constant");
      return info;
    }
    std::vector<int64_t> axes = ax->constant().to_i64();
    if (pads.size() != 2 * axes.size()) {
      info.reason = cat("it has ", pads.size(), " pads for ", axes.size(), " axes");
      return info;
    }
    info.pads.assign(2 * rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (a < 0 || a >= rank) {
        info.reason = cat("its axis ", axes[i], " is out of range for rank ", rank);
        return info;
      }
      info.pads[a] = pads[i];
      info.pads[a + rank] = pads[i + axes.size()];
    }
  } else {
    if (static_cast<int64_t>(pads.size()) != 2 * rank) {
      info.reason = cat("it has ", pads.size(), " pads for an input of rank ", rank);
      return info;
    }
    info.pads = pads;
  }
  return info;
}

}  // namespace

size_t fold_pad(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  size_t count = 0;
  for (ir::Node* pad : g.topo_order()) {
    if (ed.erased(pad) || pad->op_type() != "Pad" || !is_onnx_domain(*pad) || !pad->input(0)) continue;
    std::string where = pad->name();
    auto skip = [&](const std::string& reason) {
      if (log) log->skipped(kFoldPadIntoConvolution, where, "Pad not folded: " + reason);
    };
    ir::Value* y = pad->output(0);
    if (g.is_output(y)) {
      skip(cat("its output '", y->name(), "' is a graph output"));
      continue;
    }
    if (y->uses().size() != 1) {
      skip(cat("its output is read by ", y->uses().size(), " nodes"));
      continue;
    }
    ir::Node* c = y->uses()[0].node;
    where = cat(pad->name(), " -> ", c->name());
    const std::string& op = c->op_type();
    if (!is_onnx_domain(*c) || (op != "Conv" && op != "AveragePool" && op != "MaxPool")) {
      skip(cat("its reader is ", op, ", not Conv, AveragePool or MaxPool"));
      continue;
    }
    if (y->uses()[0].input_index != 0) {
      skip(cat("it feeds input ", y->uses()[0].input_index, " of the ", op, ", not its data"));
      continue;
    }
    PadInfo info = read_pad(*pad);
    if (!info.reason.empty()) {
      skip(info.reason);
      continue;
    }
    const size_t rank = info.pads.size() / 2;
    if (rank < 3) {
      skip(cat("its input has rank ", rank, "; the ", op, " needs N, C and spatial dims"));
      continue;
    }
    if (info.pads[0] || info.pads[1] || info.pads[rank] || info.pads[rank + 1]) {
      skip(cat("it pads the batch or channel dim (pads [", join(info.pads), "])"));
      continue;
    }
    bool negative = false;
    for (int64_t p : info.pads) negative |= p < 0;
    if (negative) {
      skip(cat("it has negative pads [", join(info.pads), "] (a crop)"));
      continue;
    }
    // The consumer must pad with the Pad's value itself.
    if (op == "MaxPool") {
      if (!(std::isinf(info.value) && info.value < 0)) {
        skip(cat("MaxPool pads with -inf but the Pad's value is ", info.value));
        continue;
      }
      if (c->num_outputs() > 1 && !other_reader(g, c->output(1), nullptr).empty()) {
        skip("the MaxPool's Indices output is read (indices would refer to the unpadded input)");
        continue;
      }
    } else if (info.value != 0) {
      skip(cat(op, " pads with 0 but the Pad's value is ", info.value));
      continue;
    }
    const std::string auto_pad = c->attr_s("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") {
      skip(cat("the ", op, " has auto_pad = ", auto_pad));
      continue;
    }
    if (op != "Conv" && c->attr_i("ceil_mode", 0) != 0) {
      skip(cat("the ", op, " has ceil_mode = 1"));
      continue;
    }
    const size_t nsp = rank - 2;
    std::vector<int64_t> cp =
        auto_pad == "VALID" ? std::vector<int64_t>(2 * nsp, 0) : c->attr_ints("pads", std::vector<int64_t>(2 * nsp, 0));
    if (cp.size() != 2 * nsp) {
      skip(cat("the ", op, " has ", cp.size(), " pads for ", nsp, " spatial dims"));
      continue;
    }
    // count_include_pad = 0 leaves the AveragePool's own padding out of the average; the Pad's
    // zeros always count. With no padding of its own (and ceil_mode 0: every window inside the
    // padded input) it averages whole windows either way, so it takes the Pad's as counted.
    const bool own_pads = std::any_of(cp.begin(), cp.end(), [](int64_t p) { return p != 0; });
    if (op == "AveragePool" && c->attr_i("count_include_pad", 0) != 1) {
      if (own_pads) {
        skip("the AveragePool pads itself with count_include_pad = 0 (its padding would not count in the average, "
             "the Pad's would)");
        continue;
      }
      c->attrs["count_include_pad"] = ir::Attribute(int64_t{1});
    }
    for (size_t i = 0; i < nsp; ++i) {
      cp[i] += info.pads[2 + i];
      cp[nsp + i] += info.pads[rank + 2 + i];
    }
    c->attrs["pads"] = ir::Attribute(cp);
    c->attrs.erase("auto_pad");
    g.set_node_input(c, 0, pad->input(0));
    ed.erase(pad);
    ++count;
    if (log) log->applied(kFoldPadIntoConvolution, where, cat("Pad folded into the ", op, ": pads [", join(cp), "]"));
  }
  return count;
}

}  // namespace kiln::transforms
