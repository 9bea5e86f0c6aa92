#pragma once
// Typed node attributes.
#include <kiln/tensor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace kiln::ir {

class Graph;

enum class AttrType { i, f, s, ints, floats, strings, tensor, graph };

const char* attr_type_name(AttrType t);

struct Attribute {
  using Value = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                             std::vector<std::string>, Tensor, std::shared_ptr<Graph>>;
  Value value;

  Attribute() = default;
  template <typename T>
  Attribute(T v) : value(std::move(v)) {}  // NOLINT
  Attribute(int v) : value(static_cast<int64_t>(v)) {}  // NOLINT
  Attribute(double v) : value(static_cast<float>(v)) {}  // NOLINT
  Attribute(const char* v) : value(std::string(v)) {}  // NOLINT

  AttrType type() const { return static_cast<AttrType>(value.index()); }
  std::string to_string() const;
};

}  // namespace kiln::ir
