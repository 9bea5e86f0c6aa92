#pragma once
// Snippets ops: what a Linear IR expression computes. An Op is a light value (type name +
// numeric attributes); body graphs use ONNX ops plus the snippets-only ops below, which
// the data-flow passes create in domain kSnippetsDomain.
#include <map>
#include <string>

namespace kiln::snippets {

inline constexpr const char* kSnippetsDomain = "kiln.snippets";

// Snippets-only op types (besides the ONNX elementwise ops, which keep their ONNX names):
//   Parameter / Result       kernel inputs / outputs ("index" = position)
//   Scalar                   one f32 constant held in the kernel ("value")
//   PowerStatic              x ^ "power" with a compile-time exponent
//   FMA                      a * b + c
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
struct Op {
  std::string type;
  std::map<std::string, double> attrs;
  double attr(const std::string& name, double def = 0.0) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? def : it->second;
  }
  bool has(const std::string& name) const { return attrs.count(name) != 0; }
};

// Ops that touch memory or control flow rather than computing on vector registers.
inline bool is_memory_op(const std::string& t) {
  return t == "Load" || t == "Store" || t == "BroadcastLoad";
}
inline bool is_io_op(const std::string& t) { return t == "Parameter" || t == "Result"; }
inline bool is_loop_op(const std::string& t) { return t == "LoopBegin" || t == "LoopEnd"; }
// Updates its input 0's register in place, across the iterations of its loop.
inline bool is_accumulator(const std::string& t) { return t == "AccumulateMax" || t == "AccumulateSum"; }
inline bool is_horizon(const std::string& t) { return t == "HorizonMax" || t == "HorizonSum"; }
// Body ops that reduce along the inner dim (the generator decomposes them into the above).
inline bool is_reduction_op(const std::string& t) { return t == "Softmax" || t == "LogSoftmax"; }

}  // namespace kiln::snippets
