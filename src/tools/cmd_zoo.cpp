#include <kiln/error.hpp>

#include <iostream>

#include "commands.hpp"
#include "tools/common/zoo.hpp"

namespace kiln::cli {

int cmd_zoo(const ZooOptions& o) {
  if (o.list || o.name.empty()) {
    if (!o.list) {
      std::cerr << "kiln zoo: give a model name (or --list)\n";
      return 2;
    }
    for (const auto& e : tools::zoo_entries()) std::cout << e.name << "  " << e.description << "\n";
    return 0;
  }
  if (o.output.empty()) {
    std::cerr << "kiln zoo: -o FILE.onnx is required\n";
    return 2;
  }
  tools::write_zoo_model(o.name, o.output, o.seed);
  std::cout << "wrote " << o.name << " (seed " << o.seed << ") to " << o.output << "\n";
  return 0;
}

}  // namespace kiln::cli
