#include "ir/attribute.hpp"

#include "core/strings.hpp"
#include "ir/graph.hpp"

namespace kiln::ir {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::i: return "int";
    case AttrType::f: return "float";
    case AttrType::s: return "string";
    case AttrType::ints: return "ints";
    case AttrType::floats: return "floats";
    case AttrType::strings: return "strings";
    case AttrType::tensor: return "tensor";
    case AttrType::graph: return "graph";
  }
  return "?";
}

std::string Attribute::to_string() const {
  switch (type()) {
    case AttrType::i: return std::to_string(std::get<int64_t>(value));
    case AttrType::f: return cat(std::get<float>(value));
    case AttrType::s: return "\"" + std::get<std::string>(value) + "\"";
    case AttrType::ints: return "[" + join(std::get<std::vector<int64_t>>(value)) + "]";
    case AttrType::floats: return "[" + join(std::get<std::vector<float>>(value)) + "]";
    case AttrType::strings: return "[" + join(std::get<std::vector<std::string>>(value)) + "]";
    case AttrType::tensor: return std::get<Tensor>(value).to_string(4);
    case AttrType::graph: {
      auto g = std::get<std::shared_ptr<Graph>>(value);
      return cat("graph(", g ? g->num_nodes() : 0, " nodes)");
    }
  }
  return "?";
}

}  // namespace kiln::ir
