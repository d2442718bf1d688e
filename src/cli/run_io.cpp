// InputSet and OutputSet: .npy inputs in, .npy outputs out, for `addnorm run`.
#include "cli/run_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "addnorm/error.hpp"

namespace addnorm::cli {

namespace {

// The array's values as T: for T = float only float32 arrays (StoredInputs chose T = double when
// any input is float64), for T = double either type, float32 widened exactly. The values are
// copied (NpyArray hands them out by const reference); the array dies right after.
template <class T>
BasicTensor<T> tensor_of(NpyArray&& array, const std::string& argument) {
  if constexpr (std::is_same_v<T, float>) {
    if (array.dtype() == NpyDtype::float64) {
      // Unreachable: the run's type was chosen from these very arrays (StoredInputs).
      throw std::logic_error("--" + argument + ": a float64 array in a float32 run");
    }
    return {array.shape(), array.float32_values()};
  } else {
    if (array.dtype() == NpyDtype::float64) return {array.shape(), array.float64_values()};
    const std::vector<float>& values = array.float32_values();
    return {array.shape(), std::vector<double>(values.begin(), values.end())};
  }
}

template <class T>
constexpr NpyDtype npy_dtype_of() {
  return std::is_same_v<T, float> ? NpyDtype::float32 : NpyDtype::float64;
}

}  // namespace

void StoredInputs::read(const std::string& argument, const std::string& path) {
  try {
    arrays_.insert_or_assign(argument, Stored{path, read_npy(path)});
    paths_.push_back(path);
  } catch (const Error& error) {
    throw Error("--" + argument + ": " + error.what());
  }
}

bool StoredInputs::any_float64() const {
  return std::any_of(arrays_.begin(), arrays_.end(), [](const auto& entry) {
    return entry.second.array.dtype() == NpyDtype::float64;
  });
}

bool StoredInputs::is_input(const std::filesystem::path& file) const {
  return std::any_of(paths_.begin(), paths_.end(), [&](const std::string& path) {
    std::error_code error;
    return std::filesystem::equivalent(file, path, error) && !error;
  });
}

NpyArray StoredInputs::take(const std::string& argument, const std::string& path) {
  const auto found = arrays_.find(argument);
  // Every input an op loads is one its subcommand declares (OpCommand::input), read before the
  // run chose its type; anything else is a bug here, not a user's mistake.
  if (found == arrays_.end() || found->second.path != path) {
    throw std::logic_error("addnorm run: --" + argument + " was not read before the run");
  }
  NpyArray array = std::move(found->second.array);
  arrays_.erase(found);  // the op's tensor holds the values from here on
  return array;
}

template <class T>
BasicTensor<T> InputSet<T>::load(const std::string& argument, const std::string& path) {
  BasicTensor<T> tensor = tensor_of<T>(stored_.take(argument, path), argument);
  largest_elements_ = std::max(largest_elements_, tensor.shape().numel());
  return tensor;
}

template <class T>
std::optional<BasicTensor<T>> InputSet<T>::load_optional(const std::string& argument,
                                                         const std::string& path) {
  if (path.empty()) return std::nullopt;
  return load(argument, path);
}

template <class T>
BasicTensor<T> InputSet<T>::load_for_backward(const std::string& argument,
                                              const std::string& path) {
  if (path.empty()) throw Error("--" + argument + " is required with --backward");
  return load(argument, path);
}

template <class T>
BasicTensor<T>& OutputSet<T>::add(const std::string& name, const Shape& shape) {
  const int64_t largest = inputs_.largest_elements();
  const int64_t elements = shape.numel(name.c_str());
  if (elements > std::max<int64_t>(largest, 1)) {
    throw Error(name + " would have shape " + shape.to_string() + " (" + std::to_string(elements) +
                " elements), expected at most " + std::to_string(std::max<int64_t>(largest, 1)) +
                ": no output may have more elements than the largest input (" +
                std::to_string(largest) + ") or 1, and an input with no elements has no " +
                "statistics to write");
  }
  outputs_.push_back({name, BasicTensor<T>(shape)});
  return outputs_.back().tensor;
}

template <class T>
BasicTensor<T>& OutputSet<T>::add_copy(const std::string& name, const BasicTensor<T>& initial) {
  outputs_.push_back({name, initial});
  return outputs_.back().tensor;
}

namespace {

// Staging folders are named ".addnorm-run-<pid>-<random>" inside the output directory: the
// same file system as the outputs, so moving a finished file into place is a rename.
constexpr std::string_view kStagingPrefix = ".addnorm-run-";

// Removes staging folders left by runs that were killed (their process is gone).
void remove_stale_staging(const std::filesystem::path& directory) {
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kStagingPrefix, 0) != 0) continue;
    const std::string rest = name.substr(kStagingPrefix.size());
    long pid = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (error != std::errc() || end == rest.data() || *end != '-' || pid <= 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }
}

// A fresh staging folder, removed again when it goes out of scope (after the renames, or on
// any error).
class StagingFolder {
 public:
  explicit StagingFolder(const std::filesystem::path& directory) {
    std::string pattern =
        (directory / (std::string(kStagingPrefix) + std::to_string(getpid()) + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error("--out " + directory.string() + ": cannot create a staging folder there (" +
                  std::generic_category().message(errno) + ")");
    }
    path_ = pattern;
  }
  ~StagingFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

// The manifest of a complete run: the outputs that belong together, with their shapes, dtype and
// sizes. Written last and removed before the first output moves, so a folder holding it holds
// one run's outputs; a run killed between two renames leaves no manifest (docs/security.md).
void write_manifest(const std::filesystem::path& path, const nlohmann::json& manifest) {
  std::ofstream out(path, std::ios::binary);
  out << manifest.dump(2) << "\n";
  out.close();
  if (!out) throw Error("cannot write " + path.string());
}

// Whether `name` is one `addnorm run` could have written: letters, digits and underscores,
// then ".npy" (every output's name is such; nothing else, not a NUL, a separator or a dot
// before the extension, can pass).
bool output_file_name(const std::string& name) {
  constexpr std::string_view kExtension = ".npy";
  if (name.size() <= kExtension.size() ||
      name.compare(name.size() - kExtension.size(), kExtension.size(), kExtension) != 0) {
    return false;
  }
  return std::all_of(name.begin(), name.end() - static_cast<std::ptrdiff_t>(kExtension.size()),
                     [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '_';
                     });
}

// The outputs the earlier run in `directory` listed in its manifest and this run does not
// write (`files`), to be removed so that the folder holds one run's outputs. A manifest is a
// file anyone can edit, so only names an output could have (output_file_name) count; a
// manifest over 1 MiB or not addnorm's JSON lists none.
std::vector<std::string> earlier_outputs(const std::filesystem::path& directory,
                                         const std::vector<std::string>& files) {
  constexpr size_t kMaxManifestBytes = size_t{1} << 20;
  // Opened without following a link and without waiting on a FIFO; its size taken from the
  // open file and at most one byte past the limit read, so neither a swapped-in link nor a
  // file grown after a check can make the run block or parse without bound.
  const std::string path = (directory / kRunManifest).string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat status {};
  std::string text;
  if (::fstat(fd, &status) == 0 && S_ISREG(status.st_mode)) {
    text.resize(kMaxManifestBytes + 1);
    size_t filled = 0;
    while (filled < text.size()) {
      const ssize_t got = ::read(fd, text.data() + filled, text.size() - filled);
      if (got <= 0) break;
      filled += static_cast<size_t>(got);
    }
    text.resize(filled);
  }
  ::close(fd);
  if (text.empty() || text.size() > kMaxManifestBytes) return {};
  const nlohmann::json manifest = nlohmann::json::parse(text, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("outputs") || !manifest["outputs"].is_array()) {
    return {};
  }
  std::vector<std::string> stale;
  for (const auto& entry : manifest["outputs"]) {
    if (!entry.is_object() || !entry.contains("file") || !entry["file"].is_string()) continue;
    const std::string name = entry["file"].get<std::string>();
    if (output_file_name(name) && std::find(files.begin(), files.end(), name) == files.end()) {
      stale.push_back(name);
    }
  }
  return stale;
}

// All or nothing: every output is written into a staging folder first; only when all of them
// are complete, and no destination is something a file cannot replace, are they renamed into
// place. A full disk or a directory in the way leaves the earlier files untouched. The renames
// are one per file, so a process killed between two of them leaves a mix; the manifest
// (kRunManifest) says which: it is removed before the first rename and renamed into place after
// the last. The earlier run's outputs this run does not write are removed in between, so a
// complete run leaves only its own outputs beside the files that were never a run's.
template <class T>
void OutputSet<T>::write_all(const std::filesystem::path& directory, std::ostream& summary) const {
  constexpr NpyDtype dtype = npy_dtype_of<T>();
  std::error_code created;
  std::filesystem::create_directories(directory, created);
  if (created || !std::filesystem::is_directory(directory)) {
    throw Error("--out " + directory.string() + ": cannot create the output directory" +
                (created ? " (" + created.message() + ")" : " (a file is in the way)"));
  }
  remove_stale_staging(directory);
  std::vector<std::string> files;
  for (const Output& output : outputs_) files.push_back(output.name + ".npy");
  files.emplace_back(kRunManifest);
  for (const std::string& file : files) {
    const std::filesystem::path destination = directory / file;
    std::error_code status_error;
    const auto status = std::filesystem::symlink_status(destination, status_error);
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
      throw Error("--out " + directory.string() + ": " + destination.string() +
                  " exists and is not a regular file; nothing was written");
    }
  }
  const StagingFolder staging(directory);
  nlohmann::json manifest = {{"outputs", nlohmann::json::array()}};
  for (const Output& output : outputs_) {
    const std::filesystem::path staged = staging.path() / (output.name + ".npy");
    try {
      write_npy(staged, NpyArray(output.tensor.shape(), output.tensor.values()));
      const auto dims = output.tensor.shape().dims();
      manifest["outputs"].push_back({{"file", output.name + ".npy"},
                                     {"shape", std::vector<int64_t>(dims.begin(), dims.end())},
                                     {"dtype", npy_dtype_name(dtype)},
                                     {"bytes", std::filesystem::file_size(staged)}});
    } catch (const std::exception& error) {
      throw Error("--out " + directory.string() + ": cannot write " + output.name +
                  ".npy, so nothing was written (" + error.what() + ")");
    }
  }
  try {
    write_manifest(staging.path() / kRunManifest, manifest);
  } catch (const Error& error) {
    throw Error("--out " + directory.string() + ": " + error.what() + ", so nothing was written");
  }
  const std::vector<std::string> stale = earlier_outputs(directory, files);
  std::error_code removed;
  std::filesystem::remove(directory / kRunManifest, removed);
  if (removed) {
    throw Error("--out " + directory.string() + ": cannot remove the previous " +
                std::string(kRunManifest) + " (" + removed.message() + "), so nothing was moved");
  }
  // Without a manifest now, the folder says it is not one run's; the earlier run's outputs
  // that this one does not replace go (regular files only, and never one this run read: a run
  // on an earlier run's output in the same folder keeps it), then this run's move in.
  for (const std::string& file : stale) {
    const std::filesystem::path old_output = directory / file;
    std::error_code status_error;
    if (!std::filesystem::is_regular_file(
            std::filesystem::symlink_status(old_output, status_error)) ||
        inputs_.stored().is_input(old_output)) {
      continue;
    }
    // unlink, not remove: a directory swapped in meanwhile is refused, never removed.
    if (::unlink(old_output.c_str()) != 0) {
      const std::error_code unlinked(errno, std::generic_category());
      throw Error("--out " + directory.string() + ": cannot remove the earlier run's " + file +
                  " (" + unlinked.message() + "); without " + std::string(kRunManifest) +
                  " the folder does not hold one run's outputs");
    }
  }
  for (const std::string& file : files) {
    const std::filesystem::path destination = directory / file;
    std::error_code renamed;
    std::filesystem::rename(staging.path() / file, destination, renamed);
    if (renamed) {
      throw Error("--out " + directory.string() + ": cannot move " + file + " into place (" +
                  renamed.message() + "); without " + std::string(kRunManifest) +
                  " the folder does not hold one run's outputs");
    }
  }
  for (const Output& output : outputs_) {
    summary << "wrote " << (directory / (output.name + ".npy")).string() << "  shape "
            << output.tensor.shape().to_string() << "  " << npy_dtype_name(dtype) << "\n";
  }
}

template class InputSet<float>;
template class InputSet<double>;
template class OutputSet<float>;
template class OutputSet<double>;

}  // namespace addnorm::cli
