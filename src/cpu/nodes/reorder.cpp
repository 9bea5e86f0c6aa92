// Reorder: converts a tensor between layouts (plain <-> blocked) with oneDNN's reorder.
// The graph inserts one where a consumer needs another layout than its producer made.
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

class ReorderNode : public Node {
 public:
  ReorderNode(const std::string& n, dnnl::memory::desc dst) : dst_(std::move(dst)) { name = n; }
  const char* type() const override { return "Reorder"; }
  NodeKind kind() const override { return NodeKind::Reorder; }

  std::vector<InputLayout> prepare() override {
    Edge* out = outputs[0];
    out->set_layout(dst_);
    pd_ = dnnl::reorder::primitive_desc(cpu_engine(), inputs[0]->desc(), cpu_engine(), out->desc());
    prim_ = dnnl::reorder(pd_);
    impl = pd_.impl_info_str();
    return {InputLayout::any()};
  }

  void execute(dnnl::stream& stream) override {
    auto src = inputs[0]->memory();
    auto dst = outputs[0]->memory();
    prim_.execute(stream, src, dst);
  }

 private:
  dnnl::memory::desc dst_;
  dnnl::reorder::primitive_desc pd_;
  dnnl::reorder prim_;
};

}  // namespace

std::unique_ptr<Node> make_reorder_node(const std::string& name, dnnl::memory::desc dst) {
  return std::make_unique<ReorderNode>(name, std::move(dst));
}

}  // namespace kiln::cpu
