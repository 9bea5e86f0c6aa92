#include "transforms/compute_fp16_in_f32.hpp"

#include <unordered_set>

#include "core/onnx_dtype.hpp"
#include "core/strings.hpp"
#include "ir/op_registry.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

const int kOnnxFloat = dtype_to_onnx_code(DType::f32);
const int kOnnxFloat16 = dtype_to_onnx_code(DType::f16);

bool is_f16(const ir::Value* v) { return v && v->type.dtype == DType::f16; }

Tensor to_f32(const Tensor& t) {
  Tensor out(DType::f32, t.shape());
  const float16* src = t.data<float16>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) dst[i] = static_cast<float>(src[i]);
  return out;
}

// The ops whose 'dtype' attribute picks their output type.
bool has_dtype_attr(const std::string& op) {
  static const std::unordered_set<std::string> ops = {"EyeLike", "RandomNormal", "RandomUniform", "RandomNormalLike",
                                                      "RandomUniformLike", "Bernoulli"};
  return ops.count(op) != 0;
}

// Empty when the pass can run on `g`, else why not.
std::string why_not(const ir::Graph& g) {
  if (!has_fp16_values(g)) return "the graph holds no fp16 value";
  for (const ir::Node* n : g.nodes())
    for (const auto& [name, a] : n->attrs)
      if (std::holds_alternative<std::shared_ptr<ir::Graph>>(a.value))
        return cat(n->describe(), " has a body ('", name, "') that may read fp16 values of the graph by name");
  for (const ir::Node* n : g.nodes())
    for (const ir::Value* v : n->outputs())
      if (v && v->type.kind != ValueKind::tensor && v->type.dtype == DType::f16)
        return cat(n->describe(), " makes '", v->name(), "', a sequence or optional of fp16");
  return "";
}

}  // namespace

bool has_fp16_values(const ir::Graph& g) {
  for (const ir::Value* v : g.inputs())
    if (is_f16(v)) return true;
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Value* v : n->inputs())
      if (is_f16(v)) return true;
    for (const ir::Value* v : n->outputs())
      if (is_f16(v)) return true;
  }
  return false;
}

size_t compute_fp16_in_f32(ir::Graph& g, PassLog* log) {
  const std::string where = g.name.empty() ? "graph" : g.name;
  if (const std::string reason = why_not(g); !reason.empty()) {
    if (log && has_fp16_values(g)) log->skipped(kComputeFp16InF32, where, reason);
    return 0;
  }
  GraphEditor edit(g);
  std::unordered_set<const ir::Node*> interface_casts;  // made here: their types are right already

  // fp16 graph outputs keep their name and type: the value inside is renamed and cast back.
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    ir::Value* out = g.outputs()[i];
    if (!is_f16(out) || out->is_graph_input() || out->is_constant() || !out->producer()) continue;
    const std::string name = out->name();
    ir::Value* inner = edit.rename(out, g.unique_name(name + "_f32"));
    ir::Node* cast = g.add_node("Cast", {inner}, {name}, g.unique_name(name + "_to_f16"));
    cast->attrs["to"] = ir::Attribute(int64_t{kOnnxFloat16});
    cast->output(0)->type = {DType::f16, inner->type.shape};
    g.set_output(i, cast->output(0));
    interface_casts.insert(cast);
  }
  // fp16 graph inputs stay fp16: a Cast to f32 feeds their readers.
  for (ir::Value* in : g.inputs()) {
    if (!is_f16(in) || in->uses().empty()) continue;
    const std::vector<ir::Use> uses = in->uses();
    ir::Node* cast = g.add_node("Cast", {in}, 1, g.unique_name(in->name() + "_to_f32"));
    cast->attrs["to"] = ir::Attribute(int64_t{kOnnxFloat});
    cast->output(0)->type = {DType::f32, in->type.shape};
    for (const ir::Use& u : uses) g.set_node_input(u.node, u.input_index, cast->output(0));
    interface_casts.insert(cast);
  }

  size_t changed = 0;
  std::unordered_set<ir::Value*> seen;
  for (ir::Node* n : g.nodes()) {
    if (interface_casts.count(n)) continue;
    for (ir::Value* v : n->inputs()) {
      if (!v || !v->is_constant() || !is_f16(v) || !seen.insert(v).second) continue;
      v->set_constant(to_f32(v->constant()));
      ++changed;
    }
    for (ir::Value* v : n->outputs()) {
      if (!is_f16(v) || !seen.insert(v).second) continue;
      v->type.dtype = DType::f32;
      ++changed;
    }
    const std::string& op = n->op_type();
    if (!n->is_onnx_domain()) continue;
    if (op == "Cast" && n->attr_i("to", 0) == kOnnxFloat16) n->attrs["to"] = ir::Attribute(int64_t{kOnnxFloat});
    if (has_dtype_attr(op) && n->attr_i("dtype", 0) == kOnnxFloat16)
      n->attrs["dtype"] = ir::Attribute(int64_t{kOnnxFloat});
    if ((op == "Constant" || op == "ConstantOfShape") && n->has_attr("value") &&
        std::holds_alternative<Tensor>(n->attrs["value"].value) && n->attr_tensor("value").dtype() == DType::f16)
      n->attrs["value"] = ir::Attribute(to_f32(n->attr_tensor("value")));
  }
  ir::infer_shapes(g);  // checks every node takes its new types
  if (log)
    log->applied(kComputeFp16InF32, where,
                 cat(changed, " fp16 values and constants now f32; ", interface_casts.size(),
                     " Casts keep the fp16 inputs and outputs"));
  return changed;
}

}  // namespace kiln::transforms
