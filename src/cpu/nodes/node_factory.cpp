#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

std::unique_ptr<Node> make_node(const ir::Node& n) {
  if (view_supports(n)) return make_view_node(n);
  if (convolution_supports(n)) return make_convolution_node(n);
  return make_reference_node(n);
}

}  // namespace kiln::cpu
