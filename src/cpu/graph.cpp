// cpu::Graph: construction (the compile stages 4-8 run from cpu/compile_pipeline.cpp, one
// file each: graph_lower, graph_precision, graph_layouts, graph_memory), the editing API the
// optimizer passes use, and the run loop.
#include "cpu/graph.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/node_timer.hpp"
#include "core/strings.hpp"
#include "cpu/compile_pipeline.hpp"
#include "cpu/dnnl_util.hpp"
#include "ir/op_registry.hpp"

namespace kiln::cpu {

Edge* Graph::new_edge(const std::string& name, DType dtype, Shape shape) {
  if (edges_.size() == edge_chunks_.size() * kEdgeChunk) edge_chunks_.push_back(std::make_unique<Edge[]>(kEdgeChunk));
  Edge* e = &edge_chunks_.back()[edges_.size() % kEdgeChunk];
  e->name = name;
  e->dtype = dtype;
  e->shape = std::move(shape);
  edges_.push_back(e);
  return e;
}

Graph::Graph(std::shared_ptr<const ir::Graph> g, const GraphOptions& options)
    : ir_(std::move(g)), arena_(options.arena) {
  run_runtime_stages(*this, options);
}

std::vector<Node*> Graph::consumers(const Edge* e) const { return readers_of(e); }

const std::vector<Node*>& Graph::readers_of(const Edge* e) const {
  if (!readers_built_) {  // one scan for all edges: a pass asks for every node's readers
    for (Edge* edge : edges_) edge->readers.clear();
    for (auto& n : nodes_)
      for (Edge* in : n->inputs)
        if (in) {
          auto& r = in->readers;
          if (std::find(r.begin(), r.end(), n.get()) == r.end()) r.push_back(n.get());
        }
    readers_built_ = true;
  }
#ifndef NDEBUG  // the index must agree with the graph (Debug and sanitizer builds check)
  std::vector<Node*> scanned, indexed = e->readers;
  for (auto& n : nodes_)
    if (std::find(n->inputs.begin(), n->inputs.end(), e) != n->inputs.end()) scanned.push_back(n.get());
  std::sort(scanned.begin(), scanned.end());
  std::sort(indexed.begin(), indexed.end());
  KILN_CHECK(scanned == indexed, cat("cpu::Graph::consumers: the index of '", e->name,
                                     "' is stale (a pass changed node inputs without add_input)"));
#endif
  return e->readers;
}

void Graph::add_input(Node* n, Edge* e) {
  n->inputs.push_back(e);
  if (!readers_built_ || !e) return;
  auto& r = e->readers;
  if (std::find(r.begin(), r.end(), n) == r.end()) r.push_back(n);
}

bool Graph::is_graph_output(const Edge* e) const {
  for (Edge* o : output_edges_)
    if (o == e) return true;
  return false;
}

int Graph::position(const Node* n) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].get() == n) return static_cast<int>(i);
  return -1;
}

void Graph::absorb(Node* host, Node* absorbed) {
  const int h = position(host), a = position(absorbed);
  KILN_CHECK(h >= 0 && a > h, cat("cpu::Graph::absorb: '", absorbed->name, "' does not run after '", host->name, "'"));
  host->outputs = absorbed->outputs;
  host->fused.push_back(absorbed->name);
  host->fused.insert(host->fused.end(), absorbed->fused.begin(), absorbed->fused.end());
  if (readers_built_)  // absorbed leaves the graph: it reads nothing any more
    for (Edge* in : absorbed->inputs)
      if (in) in->readers.erase(std::remove(in->readers.begin(), in->readers.end(), absorbed), in->readers.end());
  std::unique_ptr<Node> keep = std::move(nodes_[static_cast<size_t>(h)]);
  absorbed_.push_back(std::move(nodes_[static_cast<size_t>(a)]));  // callers may still read it
  nodes_[static_cast<size_t>(a)] = std::move(keep);  // host runs where absorbed ran
  nodes_.erase(nodes_.begin() + h);
}

Node* Graph::replace(Node* old, std::unique_ptr<Node> fresh) {
  const int at = position(old);
  KILN_CHECK(at >= 0, cat("cpu::Graph::replace: '", old->name, "' is not in the graph"));
  Node* n = fresh.get();
  if (readers_built_) {  // old reads nothing any more, fresh its inputs
    for (Edge* in : old->inputs)
      if (in) in->readers.erase(std::remove(in->readers.begin(), in->readers.end(), old), in->readers.end());
    for (Edge* in : n->inputs)
      if (in) {
        auto& r = in->readers;
        if (std::find(r.begin(), r.end(), n) == r.end()) r.push_back(n);
      }
  }
  absorbed_.push_back(std::move(nodes_[static_cast<size_t>(at)]));  // callers may still read it
  nodes_[static_cast<size_t>(at)] = std::move(fresh);
  return n;
}

// "brgconv:avx512_core" + f32 -> "brgconv_avx512_core_f32" (the counters' exec type).
static std::string exec_type_of(const Node& n) {
  std::string t = n.impl;
  for (char& c : t)
    if (c == ':' || c == ' ') c = '_';
  DType dt = n.outputs.empty() ? DType::undefined : n.outputs[0]->dtype;
  return cat(t, "_", dtype_name(dt));
}

Tensor output_in_buffer(Tensor& buffer, DType dtype, const Shape& shape) {
  if (dtype == DType::string) return Tensor::uninitialized(dtype, shape);  // objects, not bytes
  const size_t bytes = static_cast<size_t>(shape_size(shape)) * dtype_size(dtype);
  const bool ours = buffer.defined() && buffer.use_count() == 1;  // else someone holds it: theirs
  if (!ours || buffer.byte_size() < bytes) {
    // Grown by a quarter at least: a stream of slowly growing outputs reallocates a logarithmic
    // number of times.
    const size_t grown = ours ? buffer.byte_size() + buffer.byte_size() / 4 : 0;
    buffer = Tensor::uninitialized(DType::u8, Shape{static_cast<int64_t>(std::max(bytes, grown))});
  }
  // The output holds the buffer (its owner is a copy of it) for as long as anyone holds the output.
  return Tensor::adopt(dtype, shape, std::make_shared<Tensor>(buffer), buffer.raw());
}

std::vector<Tensor> Graph::run(const std::vector<Tensor>& inputs, std::vector<ProfilingInfo>* profile,
                               std::vector<Tensor>* buffers) {
  KILN_CHECK(inputs.size() == input_edges_.size(),
             cat("cpu::Graph: ", inputs.size(), " inputs given, ", input_edges_.size(), " expected"));
  ir::TensorLimit limit(max_arena_bytes_);  // for nodes that run a reference kernel (Loop, ...)
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge* e = input_edges_[i];
    KILN_CHECK(inputs[i].shape() == e->shape && inputs[i].dtype() == e->dtype,
               cat("cpu::Graph: input '", e->name, "' is ", dtype_name(inputs[i].dtype()),
                   shape_to_string(inputs[i].shape()), ", the plan was made for ", dtype_name(e->dtype),
                   shape_to_string(e->shape)));
    e->data = const_cast<void*>(inputs[i].raw());
  }
  // the arena may have grown (and moved) for another graph sharing it
  if (void* base = arena_->reserve(arena_bytes_); base != arena_base_) bind_arena(base);
  // Outputs: written in place into the returned tensors where the plan allows, else copied out
  // of the arena after the run; with `buffers`, into the caller's buffers (output_in_buffer).
  std::vector<Tensor> out(output_edges_.size());
  if (buffers && buffers->size() < output_edges_.size()) buffers->resize(output_edges_.size());
  for (size_t i = 0; i < output_edges_.size(); ++i) {
    Edge* e = output_edges_[i];
    out[i] = buffers ? output_in_buffer((*buffers)[i], e->dtype, e->shape)
                     : Tensor::uninitialized(e->dtype, e->shape);  // written whole
    if (output_direct_[i]) e->data = out[i].raw();
  }
  bind_views();  // views of inputs and outputs follow the user's buffers
  dnnl::stream stream(cpu_engine());
  if (profile) {
    if (profile_row_of_node_.size() != nodes_.size()) {
      profile_rows_.clear();
      profile_row_of_node_.clear();
      for (auto& n : nodes_) {
        ProfilingInfo row;
        row.node_name = n->name;
        row.node_type = n->type();
        row.exec_type = exec_type_of(*n);
        profile_row_of_node_.push_back(profile_rows_.size());
        profile_rows_.push_back(std::move(row));
        for (const std::string& f : n->fused) {  // the layers this node absorbed
          ProfilingInfo gone;
          gone.status = ProfilingInfo::Status::optimized_out;
          gone.node_name = f;
          gone.node_type = n->type();
          gone.exec_type = "undef";
          gone.fused_into = n->name;
          profile_rows_.push_back(std::move(gone));
        }
      }
    }
    *profile = profile_rows_;
    // between one node's timer and the next only the timers run (their CPU clock reads)
    for (size_t i = 0; i < nodes_.size(); ++i) {
      NodeTimer timer;
      struct Profiled {  // the flag holds for this node's step only, also when it throws
        Node& n;
        explicit Profiled(Node& node) : n(node) { n.profiling = true; }
        ~Profiled() { n.profiling = false; }
      } profiled(*nodes_[i]);
      timer.start();
      nodes_[i]->execute(stream);
      stream.wait();
      timer.stop((*profile)[profile_row_of_node_[i]]);
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      Node& n = *nodes_[i];
      if (n.nested_profile.empty()) continue;
      // the node's own row keeps its own time: the nested rows' time is theirs (no double count)
      ProfilingInfo& own = (*profile)[profile_row_of_node_[i]];
      for (const ProfilingInfo& nested : n.nested_profile) {
        own.real_time_us = std::max(0.0, own.real_time_us - nested.real_time_us);
        own.cpu_time_us = std::max(0.0, own.cpu_time_us - nested.cpu_time_us);
      }
      for (const ProfilingInfo& nested : n.nested_profile) {
        profile->push_back(nested);
        profile->back().node_name = n.name + "/" + nested.node_name;
        if (!nested.fused_into.empty()) profile->back().fused_into = n.name + "/" + nested.fused_into;
      }
      n.nested_profile.clear();
    }
  } else {
    for (auto& n : nodes_) n->execute(stream);
  }
  stream.wait();
  for (size_t i = 0; i < output_edges_.size(); ++i) {
    Edge* e = output_edges_[i];
    if (!output_direct_[i] && e->bytes()) std::memcpy(out[i].raw(), e->data, e->bytes());
  }
  bind_arena(arena_base_);  // direct outputs back to their arena buffers: the tensors are the caller's now
  return out;
}

size_t Graph::quick_nodes() const {
  return f32_until_hot_ +
         static_cast<size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->quick_impl; }));
}

std::string Graph::describe() const {
  std::ostringstream os;
  os << "cpu::Graph: " << nodes_.size() << " nodes, arena " << arena_bytes_ << " bytes, " << in_place_nodes_
     << " in place, " << concat_in_place_nodes_ << " concats in place\n";
  for (auto& n : nodes_) {
    os << "  " << n->name << " : " << n->type() << " [" << n->impl << "] ->";
    for (Edge* e : n->outputs) os << " " << e->name << " " << shape_to_string(e->shape) << " " << e->layout_name();
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::cpu
