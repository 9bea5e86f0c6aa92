// SliceView: a Slice, Split or Gather of one constant index whose every output is one contiguous
// run of its input's row-major bytes (e.g. channels [c0, c1) of an NCHW tensor with N = 1, or a
// ViT's class token, row 0 of [tokens, N, C]) is a view: the output
// edges alias the input's buffer at an offset, so no bytes move and no kernel runs. What a
// channel split in ShuffleNet or a q/k/v split of a fused projection costs is then nothing.
//
// Decided at lowering from the static shapes and constant slice parameters alone
// (slice_geometry.hpp; the other such slices copy their runs: SliceCopy): outputs
// are row-major, the input is asked for row-major (a blocked producer gets a Reorder, as the
// reference kernel would need too).
#include "core/strings.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/nodes/slice_geometry.hpp"

namespace kiln::cpu {

namespace {

// The element offset of each output in the input, when every output is one contiguous run.
using Offsets = std::vector<int64_t>;

std::optional<Offsets> view_offsets(const ir::Node& n) {
  const auto g = slice_geometry(n);
  if (!g) return std::nullopt;
  Offsets offsets;
  for (const SliceBox& box : g->outs) {
    const auto at = contiguous_offset(g->in, box);
    if (!at) return std::nullopt;
    offsets.push_back(*at);
  }
  return offsets;
}

class SliceViewNode : public Node {
 public:
  SliceViewNode(const ir::Node& n, Offsets offsets) : Node(n), offsets_(std::move(offsets)) {}
  const char* type() const override { return "View"; }
  NodeKind kind() const override { return NodeKind::SliceView; }
  std::optional<OutputView> output_view(size_t i) const override {
    return OutputView{0, static_cast<size_t>(offsets_.at(i)) * dtype_size(inputs[0]->dtype)};
  }

  std::vector<InputLayout> prepare() override {
    impl = "view";
    for (Edge* o : outputs) o->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    return req;
  }
  void execute(dnnl::stream&) override {}

 private:
  Offsets offsets_;
};

}  // namespace

bool slice_view_supports(const ir::Node& n) { return view_offsets(n).has_value(); }

std::unique_ptr<Node> make_slice_view_node(const ir::Node& n) {
  auto offsets = view_offsets(n);
  KILN_CHECK(offsets, cat(n.describe(), ": not a contiguous slice of its input"));
  return std::make_unique<SliceViewNode>(n, std::move(*offsets));
}

}  // namespace kiln::cpu
