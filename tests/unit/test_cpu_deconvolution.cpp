// Deconvolution (ConvTranspose on oneDNN's deconvolution_forward) against the reference
// executor: strides, paddings, output_padding, dilations, groups, 3D, without a bias; and the
// forms that keep the reference kernel.
#include <gtest/gtest.h>

#include "cpu_test_util.hpp"
#include "tensor_test_util.hpp"

namespace test_cpu_deconvolution {

using namespace kiln;
using namespace kiln::test;

namespace {

struct Case {
  const char* what;
  Shape x, w;  // x [N, C_in, ...], w [C_in, C_out / group, k...]
  std::vector<int64_t> strides, pads, output_padding, dilations;
  int64_t group = 1;
  bool bias = true;
};

// x -> Relu -> ConvTranspose -> Neg (the deconvolution between two other nodes)
std::shared_ptr<ir::Graph> deconv_graph(const Case& c) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 17;
  auto* x = g->add_input("x", {DType::f32, ir::PartialShape(c.x)});
  auto* relu = g->add_node("Relu", {x}, 1, "relu");
  std::vector<ir::Value*> ins = {relu->output(0), g->add_constant("w", random_tensor(c.w, 2, 0.5f))};
  if (c.bias) ins.push_back(g->add_constant("b", random_tensor({c.w[1] * c.group}, 3)));
  auto* d = g->add_node("ConvTranspose", ins, 1, "deconv");
  d->attrs["kernel_shape"] = std::vector<int64_t>(c.w.begin() + 2, c.w.end());  // as exporters write it
  if (!c.strides.empty()) d->attrs["strides"] = c.strides;
  if (!c.pads.empty()) d->attrs["pads"] = c.pads;
  if (!c.output_padding.empty()) d->attrs["output_padding"] = c.output_padding;
  if (!c.dilations.empty()) d->attrs["dilations"] = c.dilations;
  if (c.group != 1) d->attrs["group"] = c.group;
  auto* neg = g->add_node("Neg", {d->output(0)}, 1, "neg");
  g->add_output(neg->output(0));
  return g;
}

}  // namespace

TEST(CpuDeconvolution, MatchesTheReference) {
  const Case cases[] = {
      {"3x3 stride 1", {1, 8, 9, 7}, {8, 6, 3, 3}, {}, {}, {}, {}},
      {"2x2 stride 2 (Mask R-CNN's mask head)", {2, 16, 14, 14}, {16, 16, 2, 2}, {2, 2}, {}, {}, {}},
      {"4x4 stride 2 pads 1 (DCGAN)", {1, 12, 8, 8}, {12, 5, 4, 4}, {2, 2}, {1, 1, 1, 1}, {}, {}},
      {"3x3 stride 2 pads 1 output_padding 1", {1, 8, 7, 5}, {8, 8, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {}},
      {"uneven pads and strides", {1, 4, 6, 9}, {4, 3, 3, 2}, {3, 2}, {0, 2, 1, 0}, {}, {}},
      {"dilation 2", {1, 8, 6, 6}, {8, 4, 3, 3}, {}, {}, {}, {2, 2}},
      {"groups of 4", {1, 16, 6, 5}, {16, 3, 3, 3}, {2, 2}, {}, {}, {}, 4},
      {"depthwise", {1, 8, 5, 5}, {8, 1, 2, 2}, {2, 2}, {}, {}, {}, 8},
      {"3D 2x2x2 stride 2", {1, 4, 3, 4, 5}, {4, 6, 2, 2, 2}, {2, 2, 2}, {}, {}, {}},
      {"no bias", {1, 8, 5, 6}, {8, 4, 3, 3}, {2, 1}, {}, {}, {}, 1, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto cg = compare_with_reference(deconv_graph(c), {random_tensor(c.x, 1)}, 1e-4, 1e-4);
    EXPECT_EQ(count_type(*cg, "Deconvolution"), 1u) << cg->describe();
    EXPECT_EQ(count_type(*cg, "Reference"), 0u) << cg->describe();
  }
}

TEST(CpuDeconvolution, FormsLeftToTheReferenceKernel) {
  struct Other {
    const char* what;
    Case c;
    std::string auto_pad;
  };
  const Other others[] = {
      // output_padding past the end padding: oneDNN's right padding would be negative
      {"output_padding without end padding", {"", {1, 4, 5, 5}, {4, 4, 3, 3}, {2, 2}, {}, {1, 1}, {}}, ""},
      {"auto_pad", {"", {1, 4, 5, 5}, {4, 4, 3, 3}, {2, 2}, {}, {}, {}}, "SAME_UPPER"},
      {"1D", {"", {1, 4, 9}, {4, 4, 3}, {2}, {}, {}, {}}, ""},
  };
  for (const Other& o : others) {
    SCOPED_TRACE(o.what);
    auto g = deconv_graph(o.c);
    if (!o.auto_pad.empty()) g->find_node("deconv")->attrs["auto_pad"] = o.auto_pad;
    auto cg = compare_with_reference(g, {random_tensor(o.c.x, 1)}, 1e-4, 1e-4);
    EXPECT_EQ(count_type(*cg, "Deconvolution"), 0u) << cg->describe();
  }
}

}  // namespace test_cpu_deconvolution
