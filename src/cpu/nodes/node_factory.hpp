#pragma once
// Picks the runtime node kind for an ir node: the first oneDNN-backed kind whose
// supports() accepts it, else Reference (the spine's kernel).
#include <memory>

#include "cpu/node.hpp"

namespace kiln::cpu {

std::unique_ptr<Node> make_node(const ir::Node& n);

// Individual kinds (one file each under src/cpu/nodes/).
std::unique_ptr<Node> make_reference_node(const ir::Node& n);
std::unique_ptr<Node> make_reorder_node(const std::string& name, dnnl::memory::desc dst);

bool view_supports(const ir::Node& n);
std::unique_ptr<Node> make_view_node(const ir::Node& n);

bool convolution_supports(const ir::Node& n);
std::unique_ptr<Node> make_convolution_node(const ir::Node& n);

}  // namespace kiln::cpu
