#pragma once
// SourceRelease: stage 7's companion when the executor owns the model and will build no
// other plan (GraphOptions::release_packed_sources). FullyConnected, Convolution and LSTM
// read their weights only through the weights cache, in the layout their primitive wants;
// once every reader of a constant holds such a packed copy, the original bytes serve no
// one, and the cache gives their pages back (WeightsCache::release). A model's weights
// are then resident once, packed, instead of twice.
//
// A constant stays when anything else might read its bytes: a node that reads it as it is
// (or through a Reorder), another node kind, a graph output, a post-op operand, a nested
// graph or attribute, another constant overlapping its bytes, or a graph with If nodes
// (they build graphs of their own).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cpu/node.hpp"

namespace kiln::ir {
class Graph;
}

namespace kiln::cpu {

class PackRecorder;
class WeightsCache;

class SourceRelease {
 public:
  // Before any node is prepared: `nodes` in execution order, `outputs` the graph's output
  // edges, `ir` the plan's graph (its attributes and nested graphs may hold constants).
  SourceRelease(const std::vector<std::unique_ptr<Node>>& nodes, const std::vector<Edge*>& outputs,
                const ir::Graph& ir, WeightsCache& cache);
  // After `n` is prepared: `inputs` are its inputs as prepare() saw them, `packed` recorded
  // what it asked the weights cache for, and `converted[i]` says a Reorder now feeds its
  // input i. Gives back what no one else reads.
  void prepared(const Node& n, const std::vector<Edge*>& inputs, const PackRecorder& packed,
                const std::vector<bool>& converted);
  size_t released_bytes() const { return released_; }

 private:
  struct Source {
    const Tensor* tensor = nullptr;
    size_t readers_left = 0;  // (node, source) pairs not prepared yet
    bool keep = false;        // some reader or holder needs the bytes
  };
  using Key = std::pair<const void*, size_t>;  // address, bytes
  std::map<Key, Source> sources_;
  WeightsCache& cache_;
  size_t released_ = 0;
};

}  // namespace kiln::cpu
