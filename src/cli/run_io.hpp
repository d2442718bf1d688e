// The file side of `addnorm run`: loading the .npy inputs an op names, and collecting its outputs
// in memory so that nothing is written until every check and every computation has succeeded.
#pragma once

#include <deque>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "addnorm/npy.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::cli {

// Loads inputs as float32 tensors and remembers whether any of them was stored as float64, in
// which case the outputs are written as float64 too.
class InputSet {
 public:
  // Reads the file given to --`argument`; errors are prefixed with "--argument: ".
  Tensor load(const std::string& argument, const std::string& path);
  // As load, or nothing when the option was not given (empty path).
  std::optional<Tensor> load_optional(const std::string& argument, const std::string& path);
  // As load, but a missing path is an error: the input is required with --backward.
  Tensor load_for_backward(const std::string& argument, const std::string& path);

  NpyDtype output_dtype() const { return any_float64_ ? NpyDtype::float64 : NpyDtype::float32; }
  // The element count of the largest input loaded so far.
  int64_t largest_elements() const { return largest_elements_; }

 private:
  bool any_float64_ = false;
  int64_t largest_elements_ = 0;
};

// The read-only view of an optional input, as the ops take it.
inline OptionalConst optional_view(const std::optional<Tensor>& tensor) {
  if (!tensor) return std::nullopt;
  return tensor->cview();
}

// The file a complete run leaves beside its outputs, listing them (write_all).
inline constexpr const char* kRunManifest = "addnorm-run.json";

// Named outputs held in memory, then written together as <directory>/<name>.npy, with the run's
// manifest, kRunManifest.
class OutputSet {
 public:
  // Outputs are bounded by `inputs`: none may have more elements than the largest input loaded
  // before it (or 1). Every op's outputs are x-sized or smaller, but an x with no elements
  // could otherwise name statistics for N x G empty groups of any size: a small file must not
  // demand a large allocation.
  explicit OutputSet(const InputSet& inputs) : inputs_(inputs) {}

  // A zero-filled output of `shape`; the reference stays valid as more outputs are added.
  Tensor& add(const std::string& name, const Shape& shape);
  // An output that starts as a copy of `initial` (for statistics an op updates in place).
  Tensor& add_copy(const std::string& name, const Tensor& initial);

  // Creates `directory` if needed, writes every output in `dtype` and prints one line per file.
  void write_all(const std::filesystem::path& directory, NpyDtype dtype,
                 std::ostream& summary) const;

 private:
  struct Output {
    std::string name;
    Tensor tensor;
  };
  const InputSet& inputs_;
  std::deque<Output> outputs_;  // a deque keeps references to earlier outputs valid
};

}  // namespace addnorm::cli
