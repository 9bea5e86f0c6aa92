#pragma once
// Snippets ops: what a Linear IR expression computes. An Op is a light value (type name +
// numeric attributes); body graphs use ONNX ops plus the snippets-only ops below, which
// the data-flow passes create in domain kSnippetsDomain.
#include <cstdint>
#include <map>
#include <string>

namespace kiln::snippets {

inline constexpr const char* kSnippetsDomain = "kiln.snippets";

// Snippets-only op types (besides the ONNX elementwise ops, which keep their ONNX names):
//   Parameter / Result       kernel inputs / outputs ("index" = position)
//   Scalar                   one f32 constant held in the kernel ("value")
//   PowerStatic              x ^ "power" with a compile-time exponent
//   FMA                      a * b + c
//   Swish                    x * Sigmoid(x), i.e. x / (1 + e^-x)
//   Load / Store             vector memory access ("count" < vector length = masked tail;
//                            a Store with "bf16" writes 2-byte bf16 elements)
//   BroadcastMove            replicate lane 0 across the vector
//   BroadcastLoad            load one element and replicate it
//   LoopBegin / LoopEnd      loop markers ("loop" = loop id)
//   VectorFill               a vector of "value" in every lane (a reduction's start)
//   AccumulateMax / -Sum     acc = max(acc, x) / acc + x in place: input 0 is the
//                            accumulator (its register is the output's), input 1 the data
//                            ("count" < vector length: only the low lanes, a masked tail)
//   HorizonMax / -Sum        the max / sum of a vector's lanes, in every lane
//   Buffer                   an intermediate row in the kernel's scratch memory, between
//                            two inner loops ("buffer" = id; Load / Store with "buffer"
//                            instead of "param" / "result" access it)
//   RegSpillBegin / -End     a vector register saved to / restored from stack slot "slot"
//
// OpKind says which of these an expression is, so the passes and emitters decide on an enum
// rather than on names; every other op (the ONNX elementwise ops, PowerStatic, FMA) is
// Compute and its type() names it. Softmax / LogSoftmax are the body's reductions, which
// DecomposeReductions turns into the ops above.
enum class OpKind : uint8_t {
  Compute,
  Parameter, Result, Scalar,
  Load, Store, BroadcastMove, BroadcastLoad,
  LoopBegin, LoopEnd,
  VectorFill, AccumulateMax, AccumulateSum, HorizonMax, HorizonSum,
  Buffer, RegSpillBegin, RegSpillEnd,
  Softmax, LogSoftmax,
};
OpKind op_kind(const std::string& type);  // Compute for any name not listed above

class Op {
 public:
  Op() = default;
  Op(std::string type, std::map<std::string, double> attributes = {})  // NOLINT: Op{"Load", {...}} reads best
      : attrs(std::move(attributes)), type_(std::move(type)), kind_(op_kind(type_)) {}
  const std::string& type() const { return type_; }
  OpKind kind() const { return kind_; }

  std::map<std::string, double> attrs;
  double attr(const std::string& name, double def = 0.0) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? def : it->second;
  }
  bool has(const std::string& name) const { return attrs.count(name) != 0; }

 private:
  std::string type_;
  OpKind kind_ = OpKind::Compute;
};

// Ops that touch memory or control flow rather than computing on vector registers.
inline bool is_memory_op(OpKind k) { return k == OpKind::Load || k == OpKind::Store || k == OpKind::BroadcastLoad; }
inline bool is_io_op(OpKind k) { return k == OpKind::Parameter || k == OpKind::Result; }
inline bool is_loop_op(OpKind k) { return k == OpKind::LoopBegin || k == OpKind::LoopEnd; }
// Updates its input 0's register in place, across the iterations of its loop.
inline bool is_accumulator(OpKind k) { return k == OpKind::AccumulateMax || k == OpKind::AccumulateSum; }
inline bool is_horizon(OpKind k) { return k == OpKind::HorizonMax || k == OpKind::HorizonSum; }
// Body ops that reduce along the inner dim (the generator decomposes them into the above).
inline bool is_reduction_op(OpKind k) { return k == OpKind::Softmax || k == OpKind::LogSoftmax; }
inline bool is_reduction_op(const std::string& onnx_op) { return is_reduction_op(op_kind(onnx_op)); }

}  // namespace kiln::snippets
