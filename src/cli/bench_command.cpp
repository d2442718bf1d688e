// `addnorm bench [options]`: runs the benchmark, a separate executable (addnorm-bench, built with
// -DADDNORM_BUILD_BENCH=ON or by scripts/bench.sh) because it links oneDNN and libtorch, which
// the addnorm command itself must not need. Every argument after `bench` goes to it unchanged.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "cli/commands.hpp"

namespace addnorm::cli {
namespace {

namespace fs = std::filesystem;

// ADDNORM_BENCH_BIN, else next to this executable (bench/ of the same build, the same folder),
// else the build-bench/ that scripts/bench.sh makes beside build/.
std::vector<fs::path> bench_candidates() {
  std::vector<fs::path> candidates;
  if (const char* explicit_path = std::getenv("ADDNORM_BENCH_BIN")) {
    candidates.emplace_back(explicit_path);
  }
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path dir = self.parent_path();
    candidates.push_back(dir / "bench" / "addnorm-bench");
    candidates.push_back(dir / "addnorm-bench");
    candidates.push_back(dir.parent_path() / "build-bench" / "bench" / "addnorm-bench");
  }
  return candidates;
}

[[noreturn]] void run_bench(const std::vector<std::string>& arguments) {
  const std::vector<fs::path> candidates = bench_candidates();
  std::string looked;
  for (const fs::path& candidate : candidates) {
    looked += (looked.empty() ? "" : ", ") + candidate.string();
    if (access(candidate.c_str(), X_OK) != 0) continue;
    std::vector<std::string> args = {candidate.string()};
    args.insert(args.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    throw Error("could not start " + candidate.string());
  }
  throw Error(
      "addnorm bench needs the benchmark executable addnorm-bench, which links oneDNN and "
      "libtorch: run `bash scripts/bench.sh` (installs them, builds build-bench/ and runs), or "
      "configure with -DADDNORM_BUILD_BENCH=ON; looked for " +
      looked);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Benchmark addnorm against the copy ceiling, oneDNN, PyTorch, its reference kernel and the "
      "textbook loop (runs addnorm-bench; `addnorm bench --help` lists its options)");
  // Everything after `bench`, --help included, belongs to addnorm-bench.
  bench->prefix_command();
  bench->set_help_flag();
  bench->allow_extras();
  bench->callback([bench] { run_bench(bench->remaining()); });
}

}  // namespace addnorm::cli
