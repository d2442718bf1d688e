// Batches of the copy, reverse and sort tasks, drawn from NumPy's generator so that a seed
// fixes them on every machine.
#include "addnorm/lab/sequence_task.hpp"

#include <algorithm>

#include "addnorm/error.hpp"
#include "lab/checks.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::lab {

std::string sequence_task_name(SequenceTask task) {
  switch (task) {
    case SequenceTask::copy:
      return "copy";
    case SequenceTask::reverse:
      return "reverse";
    case SequenceTask::sort:
      return "sort";
  }
  return "?";
}

SequenceTask parse_sequence_task(const std::string& name) {
  for (SequenceTask task : {SequenceTask::copy, SequenceTask::reverse, SequenceTask::sort}) {
    if (sequence_task_name(task) == name) return task;
  }
  throw Error("task is \"" + name + "\", expected copy, reverse or sort");
}

std::string sublayers_name(Sublayers sublayers) {
  switch (sublayers) {
    case Sublayers::attn_ffn:
      return "attn_ffn";
    case Sublayers::ffn:
      return "ffn";
    case Sublayers::attn:
      return "attn";
  }
  return "?";
}

Sublayers parse_sublayers(const std::string& name) {
  for (Sublayers sublayers : {Sublayers::attn_ffn, Sublayers::ffn, Sublayers::attn}) {
    if (sublayers_name(sublayers) == name) return sublayers;
  }
  throw Error("sublayers is \"" + name + "\", expected attn_ffn, ffn or attn");
}

TaskBatch make_task_batch(SequenceTask task, int symbols, int length, int batch,
                          numpy_random::Generator& generator) {
  TaskBatch out;
  out.batch = batch;
  out.seq = 2 * length + 1;
  const int32_t separator = symbols, blank = symbols + 1;
  for (int b = 0; b < batch; ++b) {
    std::vector<int32_t> input;
    for (int i = 0; i < length; ++i) {
      input.push_back(
          static_cast<int32_t>(generator.next_uint64() % static_cast<uint64_t>(symbols)));
    }
    std::vector<int32_t> answer = input;
    if (task == SequenceTask::reverse) std::reverse(answer.begin(), answer.end());
    if (task == SequenceTask::sort) std::sort(answer.begin(), answer.end());
    out.tokens.insert(out.tokens.end(), input.begin(), input.end());
    out.tokens.push_back(separator);
    out.tokens.insert(out.tokens.end(), static_cast<size_t>(length), blank);
    out.targets.insert(out.targets.end(), static_cast<size_t>(length) + 1, -1);
    out.targets.insert(out.targets.end(), answer.begin(), answer.end());
  }
  return out;
}

void validate(const ModelShape& shape) {
  check_fields(shape, kModelShapeFields);
  if (shape.d_model % shape.n_heads != 0) {
    throw Error("d_model is " + std::to_string(shape.d_model) +
                ", expected a multiple of n_heads = " + std::to_string(shape.n_heads));
  }
}

}  // namespace addnorm::lab
