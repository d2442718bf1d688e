// Command-line parsing for addnorm-bench (see bench_options.hpp).
#include "bench_options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <sstream>

#include "addnorm/error.hpp"

namespace addnorm::bench {
namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

template <class T>
std::string join(const std::vector<T>& values) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  return out.str();
}

int64_t parse_positive(const std::string& flag, const std::string& text) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value <= 0) {
    throw Error(flag + " has '" + text + "', expected a positive integer");
  }
  return value;
}

}  // namespace

const std::vector<std::string>& all_impls() {
  static const std::vector<std::string> impls = {"addnorm", "addnorm-p0",  "plain", "reference",
                                                 "onednn",  "torch-tuned", "torch", "textbook"};
  return impls;
}

bool wants_impl(const BenchOptions& options, const std::string& impl) {
  return std::find(options.impls.begin(), options.impls.end(), impl) != options.impls.end();
}

bool parse_options(int argc, char** argv, BenchOptions& options, int& exit_code) {
  CLI::App app{
      "addnorm-bench: addnorm against the copy-bandwidth ceiling, oneDNN, PyTorch, its reference "
      "kernel and the textbook loop, interleaved in one run on the same data"};
  std::string ops = "all", dims = "64,128,512,768,1024,4096,8192", threads = "1,2";
  std::string impls = join(all_impls()), dtypes = "f32,bf16";
  std::string decode_rows = "1,4,16", decode_dims = "1024,4096,8192";
  std::string case_source = "grid";
  bool quick = false, no_in_cache = false, no_decode = false, list = false;
  app.add_option("--cases", case_source,
                 "grid: --ops x --dims x --dtypes; table: the case table's timed cases "
                 "(bench/case_table.cpp, the cases the tests check), filtered by --ops")
      ->capture_default_str()
      ->check(CLI::IsMember({"grid", "table"}));
  app.add_option("--ops", ops, "comma-separated ops, or 'all'")->capture_default_str();
  app.add_option("--dims", dims, "row lengths D; rows = tensor size / D")->capture_default_str();
  app.add_option("--threads", threads, "thread counts")->capture_default_str();
  app.add_option("--impls", impls, "implementations")->capture_default_str();
  app.add_option("--dtypes", dtypes, "storage types (bf16 runs where an implementation has it)")
      ->capture_default_str();
  app.add_option("--tensor-mib", options.tensor_mib, "size of one out-of-cache tensor, MiB")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-in-cache", no_in_cache, "skip the in-cache case");
  app.add_option("--in-cache-mib", options.in_cache_mib, "size of the in-cache tensor, MiB")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--in-cache-dim", options.in_cache_dim, "D of the in-cache case")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-decode", no_decode, "skip the decode cases");
  app.add_option("--decode-rows", decode_rows, "rows of the decode cases (ns/call)")
      ->capture_default_str();
  app.add_option("--decode-dims", decode_dims, "D of the decode cases")->capture_default_str();
  app.add_option("--reps", options.reps, "samples per implementation (slow ones get fewer)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--case-seconds", options.case_seconds, "rough time budget of one case")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--quick", quick,
               "about a minute: D = 1024 (16 MiB), the in-cache and decode cases, 2 threads, "
               "f32 and bf16");
  app.add_flag("--smoke", options.smoke, "seconds: 4 MiB tensors, D = 64, one sample each");
  app.add_flag("--quiet", options.quiet, "only progress lines and the summary table");
  app.add_option("--heap-probe", options.heap_probe_calls,
                 "diagnostic: call each implementation N times per case, untimed, and print "
                 "the page faults and heap growth of every call (the tunables of this "
                 "process's GLIBC_TUNABLES; no child process)")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", options.json_path,
                 "write one JSON record per case and impl ('-': stdout)");
  app.add_option("--markdown", options.markdown_path, "write the summary table as Markdown");
  app.add_flag("--list", list, "list ops and implementations, then exit");
  app.add_flag("--child", options.child, "internal: the allocator-tuned PyTorch pass")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    return false;
  }
  if (list) {
    std::cout << "ops:";
    for (Op op : all_ops()) std::cout << " " << op_name(op);
    std::cout << "\nimpls: " << join(all_impls()) << "\n";
    exit_code = 0;
    return false;
  }
  if (quick) {
    dims = "1024";
    threads = "2";
    options.tensor_mib = std::min(options.tensor_mib, 16.0);
    options.reps = std::min(options.reps, 5);
    options.case_seconds = std::min(options.case_seconds, 0.5);
  }
  if (options.smoke) {
    dims = "64";
    options.tensor_mib = 4;
    options.in_cache_mib = 0.25;
    options.in_cache_dim = 64;
    decode_rows = "1";
    decode_dims = "64";
    options.reps = 1;
    options.case_seconds = 0.05;
    threads = "1";
  }
  options.table_cases = case_source == "table";
  options.in_cache = !no_in_cache;
  options.decode = !no_decode;
  for (const std::string& r : split_list(decode_rows)) {
    options.decode_rows.push_back(parse_positive("--decode-rows", r));
  }
  for (const std::string& d : split_list(decode_dims)) {
    options.decode_dims.push_back(parse_positive("--decode-dims", d));
  }
  options.ops.clear();
  if (ops == "all") {
    options.ops = all_ops();
  } else {
    for (const std::string& name : split_list(ops)) options.ops.push_back(op_from_name(name));
  }
  for (const std::string& d : split_list(dims)) options.dims.push_back(parse_positive("--dims", d));
  for (const std::string& t : split_list(threads)) {
    options.threads.push_back(static_cast<int>(parse_positive("--threads", t)));
  }
  options.impls = split_list(impls);
  for (const std::string& impl : options.impls) {
    if (std::find(all_impls().begin(), all_impls().end(), impl) == all_impls().end()) {
      throw Error("--impls has '" + impl + "', expected some of " + join(all_impls()));
    }
  }
  for (const std::string& d : split_list(dtypes)) options.dtypes.push_back(dtype_from_name(d));
  if (options.ops.empty() || options.dims.empty() || options.threads.empty() ||
      options.impls.empty() || options.dtypes.empty()) {
    throw Error("--ops, --dims, --threads, --impls and --dtypes each need at least one value");
  }
  return true;
}

std::vector<std::string> child_arguments(const BenchOptions& options,
                                         const std::vector<std::string>& impls,
                                         const std::string& json_path) {
  std::vector<std::string> ops, dtypes;
  for (Op op : options.ops) ops.push_back(op_name(op));
  for (DType dtype : options.dtypes) dtypes.push_back(dtype_name(dtype));
  std::vector<std::string> args = {"--child",        "--quiet",
                                   "--ops",          join(ops),
                                   "--dims",         join(options.dims),
                                   "--threads",      join(options.threads),
                                   "--impls",        join(impls),
                                   "--dtypes",       join(dtypes),
                                   "--tensor-mib",   std::to_string(options.tensor_mib),
                                   "--in-cache-mib", std::to_string(options.in_cache_mib),
                                   "--in-cache-dim", std::to_string(options.in_cache_dim),
                                   "--decode-rows",  join(options.decode_rows),
                                   "--decode-dims",  join(options.decode_dims),
                                   "--reps",         std::to_string(options.reps),
                                   "--case-seconds", std::to_string(options.case_seconds),
                                   "--json",         json_path};
  if (options.table_cases) {
    args.push_back("--cases");
    args.push_back("table");
  }
  if (!options.in_cache) args.push_back("--no-in-cache");
  if (!options.decode || options.decode_rows.empty() || options.decode_dims.empty()) {
    args.push_back("--no-decode");
  }
  return args;
}

}  // namespace addnorm::bench
