#pragma once
// kiln-internal op FakeQuantize (domain "kiln"), see quant_fake_quantize.cpp.
namespace kiln::ir {
class OpRegistry;
}

namespace kiln::ops {
void register_fake_quantize(ir::OpRegistry& r);
}  // namespace kiln::ops
