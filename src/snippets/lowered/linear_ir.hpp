#pragma once
// The Linear IR of the snippets design guide: an ordered list of Expressions (the order is
// the control flow), each with PortDescriptors (shape, layout, subtensor, register) and
// PortConnectors (one source ExpressionPort, any number of consumers) for the data flow.
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "snippets/op.hpp"

namespace kiln::ir {
class Graph;
}

namespace kiln::snippets::lowered {

class Expression;
class PortConnector;
using ExpressionPtr = std::shared_ptr<Expression>;
using PortConnectorPtr = std::shared_ptr<PortConnector>;

struct PortDescriptor {
  std::vector<int64_t> shape;      // the 2-D [rows, inner] view this port reads or writes
  std::vector<size_t> layout;      // dim order (planar: 0..rank-1)
  std::vector<int64_t> subtensor;  // the part one emitter call processes (e.g. [1, 16])
  // Memory ports only (Parameters, Results and the Loads / Stores PropagateLayout gives them
  // to): elements between neighbours along each dim of `shape`; empty = dense row-major.
  // A transposed input's rows are not `inner` apart.
  std::vector<int64_t> strides;
  int reg = -1;                    // abstract, later physical vector register (-1: none)
};

class ExpressionPort {
 public:
  enum Type { Input, Output };
  ExpressionPort() = default;
  ExpressionPort(Expression* e, Type t, size_t i) : expr_(e), type_(t), index_(i) {}
  Expression* get_expr() const { return expr_; }
  Type get_type() const { return type_; }
  size_t get_index() const { return index_; }
  PortDescriptor& get_descriptor() const;
  const PortConnectorPtr& get_port_connector() const;
  bool operator==(const ExpressionPort& o) const {
    return expr_ == o.expr_ && type_ == o.type_ && index_ == o.index_;
  }

 private:
  Expression* expr_ = nullptr;
  Type type_ = Input;
  size_t index_ = 0;
};

class PortConnector {
 public:
  explicit PortConnector(ExpressionPort source) : source_(source) {}
  const ExpressionPort& get_source() const { return source_; }
  const std::vector<ExpressionPort>& get_consumers() const { return consumers_; }
  void add_consumer(const ExpressionPort& p) { consumers_.push_back(p); }
  void remove_consumer(const ExpressionPort& p);
  void set_source(const ExpressionPort& p) { source_ = p; }

 private:
  ExpressionPort source_;
  std::vector<ExpressionPort> consumers_;
};

class Expression {
 public:
  Expression(Op op, size_t num_inputs, size_t num_outputs);
  const Op& op() const { return op_; }
  Op& op() { return op_; }
  const std::string& type() const { return op_.type(); }  // the op's name (dumps, emitter lookup)
  OpKind kind() const { return op_.kind(); }              // what the passes decide on
  size_t id() const { return id_; }

  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  const PortConnectorPtr& get_input_port_connector(size_t i) const { return inputs_.at(i); }
  const PortConnectorPtr& get_output_port_connector(size_t i) const { return outputs_.at(i); }
  PortDescriptor& get_input_port_descriptor(size_t i) { return in_desc_.at(i); }
  PortDescriptor& get_output_port_descriptor(size_t i) { return out_desc_.at(i); }
  const PortDescriptor& get_input_port_descriptor(size_t i) const { return in_desc_.at(i); }
  const PortDescriptor& get_output_port_descriptor(size_t i) const { return out_desc_.at(i); }
  ExpressionPort get_input_port(size_t i) { return {this, ExpressionPort::Input, i}; }
  ExpressionPort get_output_port(size_t i) { return {this, ExpressionPort::Output, i}; }
  // The expression producing input i.
  Expression* input_expr(size_t i) const { return inputs_.at(i)->get_source().get_expr(); }

  // Loop nest this expression belongs to, outermost first (ids into LinearIR::loops()).
  std::vector<size_t> loop_ids;
  // Live range of the register this expression defines (positions in the linear order).
  int64_t live_begin = -1, live_end = -1;

 private:
  friend class LinearIR;
  Op op_;
  size_t id_ = 0;
  std::vector<PortConnectorPtr> inputs_, outputs_;
  std::vector<PortDescriptor> in_desc_, out_desc_;
};

// One memory port of a loop: a Load/BroadcastLoad input or a Store output (of a Parameter,
// a Result or a Buffer), with the data
// pointer shifts InitLoops computes (in elements).
struct LoopPort {
  Expression* expr = nullptr;
  int64_t ptr_increment = 0;        // per iteration, multiplied by the loop's increment
  int64_t finalization_offset = 0;  // after the loop ends
  bool is_incremented = true;       // CleanRepeatedDataPointerShifts clears repeats
};

struct LoopInfo {
  int64_t work_amount = 0;  // -1: given at run time (the rows of one kernel call)
  int64_t increment = 1;
  size_t dim_idx = 0;       // 0 = inner dim, 1 = rows
  std::vector<LoopPort> entry_points, exit_points;
  bool is_tail = false;     // created by InsertSpecificIterations
  bool evaluate_once = false;  // OptimizeLoopSingleEvaluation: no counter, no jump back
};

class LinearIR {
 public:
  using container = std::list<ExpressionPtr>;
  using iterator = container::iterator;

  LinearIR() = default;
  LinearIR(const LinearIR&) = delete;
  LinearIR& operator=(const LinearIR&) = delete;

  // Converts a body graph (after the data-flow passes) to expressions in topological order.
  // input_shapes / output_shape: the 2-D [rows, inner] views (a 1 where an input broadcasts).
  // input_strides (optional): each input's memory strides over its 2-D view (see
  // PortDescriptor::strides), from the schedule.
  static std::unique_ptr<LinearIR> from_graph(const ir::Graph& body, const std::vector<std::vector<int64_t>>& input_shapes,
                                              const std::vector<int64_t>& output_shape,
                                              const std::vector<std::vector<int64_t>>& input_strides = {});

  // The expressions in order. The list changes only through the methods below, which keep
  // find() O(1): a Subgraph of thousands of ops lowers in linear time.
  const container& expressions() const { return exprs_; }
  iterator begin() { return exprs_.begin(); }
  iterator end() { return exprs_.end(); }
  iterator find(const Expression* e);
  // Puts the expressions in the order of `order` (a permutation of them).
  void reorder(const std::vector<ExpressionPtr>& order);

  std::vector<LoopInfo>& loops() { return loops_; }
  const std::vector<LoopInfo>& loops() const { return loops_; }
  size_t add_loop(LoopInfo info) {
    loops_.push_back(std::move(info));
    return loops_.size() - 1;
  }
  const std::vector<int64_t>& master_shape() const { return master_shape_; }
  void set_master_shape(std::vector<int64_t> s) { master_shape_ = std::move(s); }
  // f32 lanes of the target's vector register (16 for AVX-512, 8 for AVX2): the inner
  // loop's increment and the width of a Load / Store.
  int64_t vector_length() const { return vector_length_; }
  void set_vector_length(int64_t v) { vector_length_ = v; }
  // Vectors per iteration of the unrolled inner loops (UnrollLoops; 1 = no unrolling).
  int64_t unroll_factor() const { return unroll_factor_; }
  void set_unroll_factor(int64_t u) { unroll_factor_ = u; }

  // Creates an expression for `op` reading `inputs` (output ports of existing expressions)
  // with `num_outputs` outputs, inserts it before `pos` and gives it `loop_ids`. The output
  // descriptors copy the first input's (override after). Returns the new expression.
  ExpressionPtr insert_node(iterator pos, Op op, const std::vector<ExpressionPort>& inputs, size_t num_outputs,
                            const std::vector<size_t>& loop_ids);
  // Replaces a chain `old` (first..last in order, the data flowing through them) by a new
  // expression of `op`: it reads the first expression's inputs and feeds the last one's
  // consumers; it takes the last one's place and loop ids.
  ExpressionPtr replace_with_node(const std::vector<ExpressionPtr>& old, Op op);
  // Same with a prepared expression (same number of inputs/outputs as the chain's ends).
  void replace_with_expr(const std::vector<ExpressionPtr>& old, const ExpressionPtr& new_expr);
  // Rewires consumer input `in` to read `source` (an output port).
  static void connect(const ExpressionPort& source, const ExpressionPort& in);
  // Removes an expression whose outputs have no consumers.
  void erase(iterator it);
  // Makes a detached expression (not in the list) reading `inputs`.
  ExpressionPtr make_expression(Op op, const std::vector<ExpressionPort>& inputs, size_t num_outputs);

  // AllocateBuffers' result: the scratch offset (elements) of each buffer data pointer
  // ("ptr" of a Buffer and of its Loads / Stores; one, at 0, shared by all Buffers) and the
  // scratch a kernel call needs.
  const std::vector<int64_t>& buffer_offsets() const { return buffer_offsets_; }
  int64_t scratch_size() const { return scratch_size_; }
  // The Results are stored as bf16 (InsertLoadStore marks their Stores "bf16").
  bool bf16_outputs() const { return bf16_outputs_; }
  void set_bf16_outputs(bool b) { bf16_outputs_ = b; }
  void set_buffers(std::vector<int64_t> offsets, int64_t scratch) {
    buffer_offsets_ = std::move(offsets);
    scratch_size_ = scratch;
  }

  // Debug print: every expression with its connectors, descriptors and registers.
  std::string debug_print() const;
  // Control-flow view: every expression in order, loops with work amount / increment / shifts.
  std::string serialize_control_flow() const;
  // Data-flow view: the computation only (no LoopBegin/LoopEnd), each value's producers.
  std::string serialize_data_flow() const;

 private:
  iterator append(ExpressionPtr e);
  container exprs_;
  std::unordered_map<const Expression*, iterator> position_;  // of every expression of exprs_
  std::vector<LoopInfo> loops_;
  std::vector<int64_t> master_shape_;
  int64_t vector_length_ = 16;
  int64_t unroll_factor_ = 1;
  std::vector<int64_t> buffer_offsets_;
  int64_t scratch_size_ = 0;
  bool bf16_outputs_ = false;
  size_t next_id_ = 0;
};

std::string expr_name(const Expression& e);  // "Add#5"

}  // namespace kiln::snippets::lowered
