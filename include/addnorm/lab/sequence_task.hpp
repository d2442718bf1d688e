// The synthetic sequence tasks the transformer experiments train and probe on, and the model
// shape they share. Every task needs attention: the input is n symbols, a separator and n blank
// positions, and the targets sit on the blank positions, so each answer has to be fetched from
// another position:
//   copy     the input again            a b c d | a b c d
//   reverse  the input backwards        a b c d | d c b a
//   sort     the input in sorted order  c a d b | a b c d
// Only the n answer positions count in the loss (the others are ignored).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/nn/block.hpp"
#include "addnorm/numpy_random.hpp"

namespace addnorm::lab {

enum class SequenceTask { copy, reverse, sort };
std::string sequence_task_name(SequenceTask task);          // "copy", "reverse", "sort"
SequenceTask parse_sequence_task(const std::string& name);  // throws Error for another name

struct TaskBatch {
  int batch = 0;
  int seq = 0;                   // 2 n + 1
  std::vector<int32_t> tokens;   // [batch * seq]
  std::vector<int32_t> targets;  // [batch * seq], -1 where ignored
};

// Symbols are 0..symbols-1; the separator is `symbols` and the blank `symbols + 1`, so the
// vocabulary has symbols + 2 entries.
TaskBatch make_task_batch(SequenceTask task, int symbols, int length, int batch,
                          numpy_random::Generator& generator);

// Which sub-layers a block has: attention then FFN (the transformer's block), the FFN only
// (the block of warmup and signal-propagation studies; nothing mixes the tokens), or the
// attention only (the block of rank-collapse studies).
enum class Sublayers { attn_ffn, ffn, attn };
std::string sublayers_name(Sublayers sublayers);     // "attn_ffn", "ffn", "attn"
Sublayers parse_sublayers(const std::string& name);  // throws Error for another name

// The transformer the experiments build: sizes of one block.
struct ModelShape {
  int d_model = 32;  // in [4, 512], a multiple of n_heads
  int n_heads = 4;   // in [1, 16]
  int d_ff = 64;     // in [1, 2048]
  Sublayers sublayers = Sublayers::attn_ffn;
};
void validate(const ModelShape& shape);

}  // namespace addnorm::lab
