// Softmax cross-entropy over the last axis: the loss head of the sequence model.
#pragma once

#include <cstdint>
#include <span>

#include "addnorm/tensor.hpp"

namespace addnorm::nn {

// Mean over rows whose target != ignore_index of -log softmax(logits[row])[target]. logits is
// [rows, classes] (any leading shape; the last axis is the classes); targets has one entry per
// row. When dlogits is given (same shape as logits) it receives d(loss)/d(logits). Returns 0 and
// zero gradients when every row is ignored. Throws Error for a target outside [0, classes).
double softmax_cross_entropy(ConstView logits, std::span<const int32_t> targets,
                             OptionalMutable dlogits = {}, int32_t ignore_index = -1);

}  // namespace addnorm::nn
