// The file side of `addnorm run`: loading the .npy inputs an op names, and collecting its outputs
// in memory so that nothing is written until every check and every computation has succeeded.
#pragma once

#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "addnorm/npy.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::cli {

// The files one `addnorm run` names, each read once, before the op runs: the element type the op
// runs in depends on all of them (any input stored as float64 sends every input through the
// float64 ops, as the NumPy and PyTorch faces send them, instead of rounding it to float32).
class StoredInputs {
 public:
  // Reads the file given to --`argument`; errors are prefixed with "--argument: ".
  void read(const std::string& argument, const std::string& path);
  // Whether any file read so far is stored as float64.
  bool any_float64() const;
  // Whether `file` is one of the files read (the same file, by device and inode, whatever the
  // path): a run must not remove its own input.
  bool is_input(const std::filesystem::path& file) const;
  // The array read for --`argument` from `path`, handed over once (std::logic_error if it was
  // not read: every input an op loads must be declared by its subcommand).
  NpyArray take(const std::string& argument, const std::string& path);

 private:
  struct Stored {
    std::string path;
    NpyArray array;
  };
  std::map<std::string, Stored> arrays_;  // by argument
  std::vector<std::string> paths_;        // every file read, kept after take()
};

// Hands an op its inputs as tensors of T, from the files StoredInputs read: T = float when every
// input is float32, double otherwise (float32 inputs widened exactly).
template <class T>
class InputSet {
 public:
  explicit InputSet(StoredInputs& stored) : stored_(stored) {}

  // The input given to --`argument` (read from `path`).
  BasicTensor<T> load(const std::string& argument, const std::string& path);
  // As load, or nothing when the option was not given (empty path).
  std::optional<BasicTensor<T>> load_optional(const std::string& argument, const std::string& path);
  // As load, but a missing path is an error: the input is required with --backward.
  BasicTensor<T> load_for_backward(const std::string& argument, const std::string& path);

  // The element count of the largest input loaded so far.
  int64_t largest_elements() const { return largest_elements_; }
  const StoredInputs& stored() const { return stored_; }

 private:
  StoredInputs& stored_;
  int64_t largest_elements_ = 0;
};

// The read-only view of an optional input, as the ops take it.
template <class T>
std::optional<TensorView<const T>> optional_view(const std::optional<BasicTensor<T>>& tensor) {
  if (!tensor) return std::nullopt;
  return tensor->cview();
}

// The file a complete run leaves beside its outputs, listing them (write_all).
inline constexpr const char* kRunManifest = "addnorm-run.json";

// Named outputs held in memory, then written together as <directory>/<name>.npy, with the run's
// manifest, kRunManifest; of float32 or float64, as T is.
template <class T>
class OutputSet {
 public:
  // Outputs are bounded by `inputs`: none may have more elements than the largest input loaded
  // before it (or 1). Every op's outputs are x-sized or smaller, but an x with no elements
  // could otherwise name statistics for N x G empty groups of any size: a small file must not
  // demand a large allocation.
  explicit OutputSet(const InputSet<T>& inputs) : inputs_(inputs) {}

  // A zero-filled output of `shape`; the reference stays valid as more outputs are added.
  BasicTensor<T>& add(const std::string& name, const Shape& shape);
  // An output that starts as a copy of `initial` (for statistics an op updates in place).
  BasicTensor<T>& add_copy(const std::string& name, const BasicTensor<T>& initial);

  // Creates `directory` if needed, writes every output and prints one line per file.
  void write_all(const std::filesystem::path& directory, std::ostream& summary) const;

 private:
  struct Output {
    std::string name;
    BasicTensor<T> tensor;
  };
  const InputSet<T>& inputs_;
  std::deque<Output> outputs_;  // a deque keeps references to earlier outputs valid
};

}  // namespace addnorm::cli
