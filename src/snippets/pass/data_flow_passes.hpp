#pragma once
// Data-flow passes on a body graph (a copy the generator owns). Shape-agnostic unless noted.
#include <cstddef>
#include <cstdint>
#include <vector>

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
// Mul(x, Sigmoid(x)) with the Sigmoid read only there becomes `Swish`(x): x / (1 + e^-x).
size_t fuse_sigmoid_mul_to_swish(ir::Graph& body);
// Transposes reading a body input and keeping its last dim last become that input's layout:
// they are removed and the perm of each input is returned (empty: read as it is). The
// generator passes the perms to make_schedule. (Not shape-agnostic: it needs the rank.)
std::vector<std::vector<int64_t>> fuse_transposes_into_parameters(ir::Graph& body);

}  // namespace kiln::snippets::pass
