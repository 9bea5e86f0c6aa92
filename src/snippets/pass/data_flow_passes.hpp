#pragma once
// Data-flow passes on a body graph (a copy the generator owns). Shape-agnostic.
#include <cstddef>

namespace kiln::ir {
class Graph;
}

namespace kiln::snippets::pass {

// One-element f32 constants read by nodes become `Scalar` nodes (domain kiln.snippets,
// attribute "value"). Clip's constant min / max inputs become its "min" / "max" attributes.
// Returns the number of constants converted.
size_t convert_constants_to_scalars(ir::Graph& body);
// Pow whose exponent is a Scalar becomes `PowerStatic` (attribute "power").
size_t convert_pow_to_power_static(ir::Graph& body);
// Add(Mul(a, b), c) with the Mul read only there becomes `FMA`(a, b, c).
size_t fuse_mul_add_to_fma(ir::Graph& body);

}  // namespace kiln::snippets::pass
