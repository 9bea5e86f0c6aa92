#pragma once
// What the LSTM and GRU nodes both check of an ONNX recurrent node before kiln's kernel takes it
// (lstm.cpp, gru.cpp).
#include <kiln/tensor.hpp>

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace kiln::cpu {

// 2 for direction "bidirectional", else 1.
int64_t rnn_directions(const ir::Node& n);
// The activations attribute absent, or naming `defaults` (per direction, in any letter case).
bool rnn_default_activations(const ir::Node& n, const std::vector<std::string>& defaults);
// sequence_lens (input 4) absent, or a constant whose every value is T.
bool rnn_full_length(const ir::Node& n, int64_t T);

// The sizes of an f32 recurrent node with `gates` gates (LSTM 4, GRU 3) in the form kiln's
// kernels take: X [T, N, C] static (layout 0), W [D, gates H, C] and R [D, gates H, H] constant
// f32, hidden_size (when given) H, no clip. Else nullopt.
struct RnnSizes {
  int64_t T = 0, N = 0, C = 0, H = 0, D = 1;
};
std::optional<RnnSizes> rnn_f32_sizes(const ir::Node& n, int64_t gates);
// Input i absent, or f32 of shape `want` (a constant too when `constant`).
bool rnn_optional_f32(const ir::Node& n, size_t i, const Shape& want, bool constant);
// Every output f32.
bool rnn_f32_outputs(const ir::Node& n);

}  // namespace kiln::cpu
