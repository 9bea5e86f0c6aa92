#include "snippets/op.hpp"

#include <unordered_map>

namespace kiln::snippets {

OpKind op_kind(const std::string& type) {
  static const std::unordered_map<std::string, OpKind> kinds = {
      {"Parameter", OpKind::Parameter},         {"Result", OpKind::Result},
      {"Scalar", OpKind::Scalar},               {"Load", OpKind::Load},
      {"Store", OpKind::Store},                 {"BroadcastMove", OpKind::BroadcastMove},
      {"BroadcastLoad", OpKind::BroadcastLoad}, {"LoopBegin", OpKind::LoopBegin},
      {"LoopEnd", OpKind::LoopEnd},             {"VectorFill", OpKind::VectorFill},
      {"AccumulateMax", OpKind::AccumulateMax}, {"AccumulateSum", OpKind::AccumulateSum},
      {"HorizonMax", OpKind::HorizonMax},       {"HorizonSum", OpKind::HorizonSum},
      {"Buffer", OpKind::Buffer},               {"RegSpillBegin", OpKind::RegSpillBegin},
      {"RegSpillEnd", OpKind::RegSpillEnd},     {"Softmax", OpKind::Softmax},
      {"LogSoftmax", OpKind::LogSoftmax},
  };
  auto it = kinds.find(type);
  return it == kinds.end() ? OpKind::Compute : it->second;
}

}  // namespace kiln::snippets
