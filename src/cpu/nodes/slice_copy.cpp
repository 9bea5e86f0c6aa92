// SliceCopy: a Slice (steps of 1), Split or Gather of one constant index whose outputs are not
// contiguous runs of the input (those are SliceView's), e.g. the query, key and value thirds of
// a fused projection [L, N, 3E] along its last axis, as PyTorch's MultiheadAttention exports
// them (ViT, nn.TransformerEncoder). Each output is copied as the runs it is made of
// (slice_runs: the innermost axis that is cut and every whole axis after it), shared by the
// OpenMP team when there are enough bytes. Any element
// type; nothing made per shape. The reference kernel took 0.38 ms for each of ViT-B/16's 36
// slices ([197, 1, 2304] -> [197, 1, 768]: 1.6 GB/s).
#include <cstring>

#include "core/strings.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/nodes/slice_geometry.hpp"
#include "cpu/work_share.hpp"

namespace kiln::cpu {

namespace {

class SliceCopyNode : public Node {
 public:
  SliceCopyNode(const ir::Node& n, SliceGeometry g) : Node(n), geometry_(std::move(g)) {}
  const char* type() const override { return "Slice"; }
  NodeKind kind() const override { return NodeKind::SliceCopy; }

  std::vector<InputLayout> prepare() override {
    impl = "kiln_copy_runs";
    const size_t elem = dtype_size(inputs[0]->dtype);
    runs_.clear();
    for (const SliceBox& box : geometry_.outs) runs_.push_back(slice_runs(geometry_.in, box, elem));
    for (Edge* o : outputs) o->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    return req;
  }

  void execute(dnnl::stream&) override {
    const char* src = static_cast<const char*>(inputs[0]->data);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const SliceRuns& r = runs_[i];
      char* dst = static_cast<char*>(outputs[i]->data);
      auto copy = [&](int64_t run) {
        size_t from = r.base;
        int64_t rest = run;
        for (size_t k = r.outer.size(); k-- > 0;) {  // the run's index on each outer axis
          from += static_cast<size_t>(rest % r.outer[k]) * r.outer_stride[k];
          rest /= r.outer[k];
        }
        std::memcpy(dst + static_cast<size_t>(run) * r.run_bytes, src + from, r.run_bytes);
      };
      // below about 64 KiB, waking the team costs more than the copy
      parallel_share(r.count, copy, static_cast<size_t>(r.count) * r.run_bytes >= (size_t{64} << 10));
    }
  }

 private:
  SliceGeometry geometry_;
  std::vector<SliceRuns> runs_;
};

}  // namespace

bool slice_copy_supports(const ir::Node& n) { return slice_geometry(n).has_value(); }

std::unique_ptr<Node> make_slice_copy_node(const ir::Node& n) {
  auto g = slice_geometry(n);
  KILN_CHECK(g, cat(n.describe(), ": not a slice of its input kiln copies"));
  return std::make_unique<SliceCopyNode>(n, std::move(*g));
}

}  // namespace kiln::cpu
