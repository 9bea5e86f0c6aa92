// Cast: ONNX Cast from an integer type (int32, int8, uint8) to float, as oneDNN's reorder in
// whatever layout the input has (the output takes the same layout in f32). The conversion
// rounds to nearest, as C++ and ONNX do (exact below 2^24). The int32 -> float Cast after
// every ConvInteger / MatMulInteger of a dynamically quantized model runs here.
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

class CastNode : public SrcDstPrimitiveNode {
 public:
  explicit CastNode(const ir::Node& n) : SrcDstPrimitiveNode(n) {}
  const char* type() const override { return "Cast"; }
  NodeKind kind() const override { return NodeKind::Cast; }

  std::vector<InputLayout> prepare() override {
    dnnl_memory_desc_t d = inputs[0]->desc().data;
    d.data_type = dnnl_f32;
    outputs[0]->set_layout(dnnl::memory::desc(d));
    const dnnl::reorder::primitive_desc pd(cpu_engine(), inputs[0]->desc(), cpu_engine(), outputs[0]->desc());
    prim_ = dnnl::reorder(pd);
    impl = pd.impl_info_str();
    return {InputLayout::any()};
  }
};

}  // namespace

bool cast_supports(const ir::Node& n) {
  if (n.op_type() != "Cast" || !n.is_onnx_domain() || n.num_inputs() != 1 || !n.input(0)) return false;
  const ir::Value* x = n.input(0);
  const DType from = x->type.dtype;
  if (from != DType::i32 && from != DType::i8 && from != DType::u8) return false;
  if (!x->type.shape.is_static() || x->type.shape.rank() < 1 || x->type.shape.rank() > DNNL_MAX_NDIMS) return false;
  return n.output(0)->type.dtype == DType::f32;
}

std::unique_ptr<Node> make_cast_node(const ir::Node& n) { return std::make_unique<CastNode>(n); }

}  // namespace kiln::cpu
