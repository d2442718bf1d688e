// InputSet and OutputSet: .npy inputs in, .npy outputs out, for `addnorm run`.
#include "cli/run_io.hpp"

#include <system_error>

#include "addnorm/error.hpp"

namespace addnorm::cli {

Tensor InputSet::load(const std::string& argument, const std::string& path) {
  try {
    const NpyArray array = read_npy(path);
    if (array.dtype() == NpyDtype::float64) any_float64_ = true;
    return array.to_tensor(path);
  } catch (const Error& error) {
    throw Error("--" + argument + ": " + error.what());
  }
}

std::optional<Tensor> InputSet::load_optional(const std::string& argument,
                                              const std::string& path) {
  if (path.empty()) return std::nullopt;
  return load(argument, path);
}

Tensor InputSet::load_for_backward(const std::string& argument, const std::string& path) {
  if (path.empty()) throw Error("--" + argument + " is required with --backward");
  return load(argument, path);
}

Tensor& OutputSet::add(const std::string& name, const Shape& shape) {
  outputs_.push_back({name, Tensor(shape)});
  return outputs_.back().tensor;
}

Tensor& OutputSet::add_copy(const std::string& name, const Tensor& initial) {
  outputs_.push_back({name, initial});
  return outputs_.back().tensor;
}

void OutputSet::write_all(const std::filesystem::path& directory, NpyDtype dtype,
                          std::ostream& summary) const {
  std::error_code created;
  std::filesystem::create_directories(directory, created);
  if (created || !std::filesystem::is_directory(directory)) {
    throw Error("--out " + directory.string() + ": cannot create the output directory" +
                (created ? " (" + created.message() + ")" : " (a file is in the way)"));
  }
  for (const Output& output : outputs_) {
    const std::filesystem::path path = directory / (output.name + ".npy");
    write_npy(path, NpyArray(output.tensor, dtype));
    summary << "wrote " << path.string() << "  shape " << output.tensor.shape().to_string() << "  "
            << npy_dtype_name(dtype) << "\n";
  }
}

}  // namespace addnorm::cli
