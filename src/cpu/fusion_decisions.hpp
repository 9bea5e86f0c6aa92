#pragma once
// The post-op fusions a model's layers were found to keep an optimised kernel with,
// remembered across the model's input shapes. Whether oneDNN keeps a JIT / brgemm kernel for
// a convolution or matmul with some post-ops (keeps_jit) depends on the layer and the
// post-ops, not on the size of a dim that varies; but asking means creating a primitive
// descriptor for the new shape (0.2-1.5 ms each, measured on the variable-shape streams of
// bench/compare_dynamic.sh). A model whose input shapes vary asks once per layer and
// post-op chain; its other plans take the same answer, which only decides speed: any
// answer computes the same values.
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::cpu {

class FusionDecisions {
 public:
  // The answer remembered for `key`, else `decide(why)`'s, remembered (with its reason).
  // Thread-safe; `decide` runs outside the lock.
  bool decide(const std::string& key, std::string* why, const std::function<bool(std::string*)>& decide);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::pair<bool, std::string>> answers_;
};

}  // namespace kiln::cpu
