// addnorm-bench: for every case (op, storage type, shape, threads), the copy ceiling and every
// implementation, interleaved round-robin on the same data; then a summary, the memory report
// and, optionally, JSON and Markdown. PyTorch is measured twice: as installed in this process,
// and with glibc's allocator tuned (kTunables) in a child process (tunables are read when a
// process starts), whose ratios to addnorm are taken against the addnorm it measured itself.
// Every timed loop's page faults are counted; faults beyond the allowance (measure.hpp) are marked
// F! and, except for PyTorch as installed, make the run exit with status 3.
#include <omp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>

#include "addnorm/error.hpp"
#include "bench_options.hpp"
#include "case_table.hpp"
#include "ceiling.hpp"
#include "heap_probe.hpp"
#include "machine.hpp"
#include "measure.hpp"
#include "memory_stats.hpp"
#include "report.hpp"
#include "runner.hpp"

extern char** environ;

namespace addnorm::bench {
namespace {

// The glibc tunables of the allocator-tuned PyTorch pass. mmap_max=0: no block is mmapped, so
// a freed output is not unmapped (with mmap every page of every fresh output faults).
// trim_threshold of 1 TiB: a freed block at the top of the heap is kept, not returned to the
// kernel with sbrk (glibc trims above 128 KiB by default, so with mmap_max=0 alone an output at
// the top of the heap is returned after every call and faults again on the next one).
// tcache_count=0: PyTorch allocates with posix_memalign(64), and glibc 2.36 serves that by
// taking 64 + 32 bytes more than the request and freeing the spare bytes before and after the
// block; those few-byte chunks land in the thread cache, which counts them as in use, so they
// are never merged with the free tensors beside them. A freed tensor between two live ones is
// then a hole just too small for the next one, and the heap kept growing, a 64 MiB tensor of
// fresh pages at a time, for dozens of calls (the composed RMSNorm backward: docs/performance.md).
// Without the thread cache the spare bytes merge back at once and the heap stops growing. A
// large top_pad was tried as well: it makes every heap growth larger, and took more faults.
constexpr const char* kTunables =
    "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776:"
    "glibc.malloc.tcache_count=0";

// Whether GLIBC_TUNABLES already holds every setting of kTunables.
bool malloc_tuned() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (!tunables) return false;
  const std::string wanted = kTunables;
  for (size_t start = 0; start < wanted.size();) {
    const size_t end = std::min(wanted.find(':', start), wanted.size());
    if (!std::strstr(tunables, wanted.substr(start, end - start).c_str())) return false;
    start = end + 1;
  }
  return true;
}

std::string format_mib(double bytes) {
  std::ostringstream out;
  out.precision(0);
  out << std::fixed << bytes / double(1 << 20);
  return out.str();
}
template <class Integer>
std::string format_mib(Integer bytes) {
  return format_mib(static_cast<double>(bytes));
}

bool is_backward(Op op) {
  return op == Op::layer_norm_bwd || op == Op::rms_norm_bwd || op == Op::add_norm_pre_bwd ||
         op == Op::add_norm_post_bwd || op == Op::batch_norm_train_bwd;
}

// The benchmark's ops that time a case of the case table: its forward and its backward.
std::vector<Op> ops_of(const cases::NormCase& t) {
  if (t.op != cases::NormOp::row_norm) {
    throw Error("the case table times '" + t.name() + "'; the benchmark times its row norms");
  }
  const bool layer = t.norm == NormKind::layer_norm;
  switch (t.fusion) {
    case cases::Fusion::none:
      if (layer) return {Op::layer_norm_fwd, Op::layer_norm_bwd};
      return {Op::rms_norm_fwd, Op::rms_norm_bwd};
    case cases::Fusion::pre_norm:
      if (layer) return {Op::add_norm_pre_fwd, Op::add_norm_pre_bwd};
      break;
    case cases::Fusion::post_norm:
      if (layer && t.dropout_p == kDropoutP) return {Op::add_norm_post_fwd, Op::add_norm_post_bwd};
      break;
  }
  throw Error("the case table times '" + t.name() + "', which no benchmark op runs");
}

// The case table's timed cases, each at the run's tensor size and thread counts.
void append_table_cases(const BenchOptions& o, int64_t elements, std::vector<Case>& cases) {
  for (const cases::NormCase& t : cases::norm_case_table()) {
    if (!t.timed) continue;
    if (t.stream != t.branch || t.stream == addnorm::DType::float16) {
      throw Error("the case table times '" + t.name() + "'; the benchmark stores f32 or bf16");
    }
    const DType dtype = t.stream == addnorm::DType::bfloat16 ? DType::bf16 : DType::f32;
    for (Op op : ops_of(t)) {
      if (std::find(o.ops.begin(), o.ops.end(), op) == o.ops.end()) continue;
      const int64_t rows = std::max<int64_t>(1, elements / t.dim);
      for (int threads : o.threads) cases.push_back({op, dtype, rows, t.dim, threads});
    }
  }
}

std::vector<Case> build_cases(const BenchOptions& o) {
  const int64_t big = static_cast<int64_t>(o.tensor_mib * double(1 << 20)) / 4;
  const int64_t small = static_cast<int64_t>(o.in_cache_mib * double(1 << 20)) / 4;
  std::vector<Case> cases;
  if (o.table_cases) {
    append_table_cases(o, big, cases);
    return cases;
  }
  for (DType dtype : o.dtypes) {
    for (Op op : o.ops) {
      std::vector<std::pair<int64_t, bool>> shapes;
      for (int64_t dim : o.dims) shapes.push_back({dim, false});
      if (o.in_cache) shapes.push_back({o.in_cache_dim, true});
      for (const auto& [dim, in_cache] : shapes) {
        const int64_t rows = std::max<int64_t>(1, (in_cache ? small : big) / dim);
        for (int threads : o.threads) cases.push_back({op, dtype, rows, dim, threads, in_cache});
      }
      if (!o.decode || !is_decode_op(op)) continue;
      for (int64_t dim : o.decode_dims) {
        for (int64_t rows : o.decode_rows) {
          for (int threads : o.threads) {
            cases.push_back({op, dtype, rows, dim, threads, /*in_cache=*/true, /*decode=*/true});
          }
        }
      }
    }
  }
  return cases;
}

// One line naming what the run measured on: the CPU (model and family), the SIMD target addnorm
// dispatched to, the copy kernels' instruction set and the libraries compared.
std::string machine_line(const std::string& onednn_version) {
  return cpu_model() + " (" + cpu_family() + "), " + std::to_string(omp_get_num_procs()) +
         " CPUs; addnorm SIMD target " + addnorm_simd_target() + ", copy kernels " + copy_isa() +
         "; oneDNN " + onednn_version + ", PyTorch " + torch_version();
}

std::string self_path() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("addnorm-bench") : path.string();
}

// Runs this executable again with the tunable set, for the allocator-tuned PyTorch pass, and
// returns its records (empty, with a message, when it fails).
std::vector<Record> run_tuned_child(const BenchOptions& options) {
  const std::string json_path = (std::filesystem::temp_directory_path() /
                                 ("addnorm-bench-child-" + std::to_string(getpid()) + ".json"))
                                    .string();
  std::vector<std::string> args = {self_path()};
  for (std::string& a : child_arguments(options, {"addnorm", "torch-tuned"}, json_path)) {
    args.push_back(std::move(a));
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "GLIBC_TUNABLES=", 15) != 0) env_strings.emplace_back(*e);
  }
  const char* old = std::getenv("GLIBC_TUNABLES");
  env_strings.push_back(std::string("GLIBC_TUNABLES=") +
                        (old && *old ? std::string(old) + ":" : "") + kTunables);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::cout << "\n== PyTorch with GLIBC_TUNABLES=" << kTunables
            << " (child process, interleaved with addnorm there) ==" << std::endl;
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) {
    std::cerr << "addnorm-bench: could not start the tuned child process\n";
    return {};
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::vector<Record> records;
  std::ifstream in(json_path);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !in) {
    std::cerr << "addnorm-bench: the tuned child process failed\n";
    return {};
  }
  const nlohmann::json document = nlohmann::json::parse(in);
  for (const nlohmann::json& j : document.at("records")) {
    Record r = record_from_json(j);
    r.run = "torch-tuned";
    records.push_back(r);
  }
  std::filesystem::remove(json_path);
  return records;
}

void append_ceiling_runners(const Case& c, Workspace& ws, std::vector<Runner>& runners) {
  // The same bytes as one tensor of the case, from an input buffer into a scratch output.
  const size_t count = static_cast<size_t>(c.elements() * dtype_bytes(c.dtype)) / 4;
  float* dst = ws.ds;
  const float* src = ws.x;
  runners.push_back({"copy", copy_isa() + " stores", [=] { copy_plain(dst, src, count); }});
  runners.push_back(
      {"copy-nt", copy_isa() + " streaming stores", [=] { copy_nontemporal(dst, src, count); }});
  runners.push_back({"memcpy", "glibc", [=] { copy_memcpy(dst, src, count); }});
}

int run(int argc, char** argv) {
  BenchOptions options;
  int exit_code = 0;
  if (!parse_options(argc, argv, options, exit_code)) return exit_code;
  const bool tuned = malloc_tuned();
  const std::string torch_here = tuned ? "torch-tuned" : "torch";
  const bool probing = options.heap_probe_calls > 0;
  const bool spawn_child =
      !options.child && !tuned && !probing && wants_impl(options, "torch-tuned");
  if (tuned && !options.child && wants_impl(options, "torch")) {
    std::cout << "note: GLIBC_TUNABLES already sets " << kTunables
              << ", so PyTorch as installed is not measured in this run\n";
  }
  const int64_t baseline_rss = current_rss_bytes();
  const std::vector<Case> cases = build_cases(options);
  int64_t max_elements = 0, max_rows = 0, max_dim = 0;
  bool with_bf16 = false;
  for (const Case& c : cases) {
    max_elements = std::max(max_elements, c.elements());
    max_rows = std::max(max_rows, c.rows);
    max_dim = std::max(max_dim, c.dim);
    with_bf16 = with_bf16 || c.dtype == DType::bf16;
  }
  Workspace ws(max_elements, max_rows, max_dim, with_bf16);
  // PyTorch's outputs and autograd temporaries of a case, with room to spare: the composed
  // RMSNorm's backward holds up to eight tensors at once. A heap probe starts from the same
  // heap whatever GLIBC_TUNABLES says, so that runs with different settings compare.
  constexpr int64_t kPrefaultTensors = 16;
  const bool probes_torch = wants_impl(options, "torch") || wants_impl(options, "torch-tuned");
  if ((tuned && wants_impl(options, "torch-tuned")) || (probing && probes_torch)) {
    prefault_heap(kPrefaultTensors * max_elements * 4);
  }
  const dnnl_version_t* dnnl = dnnl_version();
  const std::string dnnl_text = std::to_string(dnnl->major) + "." + std::to_string(dnnl->minor) +
                                "." + std::to_string(dnnl->patch);
  const std::string machine = machine_line(dnnl_text);
  const std::string load_at_start = load_average();
  if (!options.child) {
    std::cout << "addnorm-bench: " << machine << "; " << cases.size() << " cases; load average "
              << load_at_start << "\n"
              << "workspace " << ws.held_bytes() / (1 << 20) << " MiB; GB/s = bytes the op "
              << "must read + write / median time; 'addnorm x' = this impl's time / addnorm's "
                 "(same run)\n";
  }
  MeasureOptions measure;
  measure.max_reps = options.reps;
  measure.min_reps = options.smoke ? 1 : std::min(3, options.reps);
  measure.case_budget_s = options.case_seconds;
  std::vector<Record> records;
  std::map<std::string, int64_t> peak_by_impl, extra_by_impl;
  int64_t max_prepared = 0;
  size_t index = 0;
  for (const Case& c : cases) {
    ++index;
    omp_set_num_threads(c.threads);
    set_torch_threads(c.threads);
    if (is_backward(c.op)) prepare_saved_stats(c, ws);
    const int64_t rss_before_setup = current_rss_bytes();
    std::vector<Runner> runners;
    append_ceiling_runners(c, ws, runners);
    const size_t ceiling_count = runners.size();
    if (wants_impl(options, "addnorm")) add_addnorm_runners(c, ws, runners);
    if (wants_impl(options, "addnorm-p0")) add_addnorm_no_dropout_runners(c, ws, runners);
    if (wants_impl(options, "reference")) add_reference_runners(c, ws, runners);
    if (wants_impl(options, "onednn")) add_onednn_runners(c, ws, runners);
    if (wants_impl(options, torch_here)) add_torch_runners(c, ws, torch_here, runners);
    if (wants_impl(options, "textbook")) add_textbook_runners(c, ws, runners);
    if (wants_impl(options, "plain")) add_plain_runners(c, ws, runners);
    std::vector<Runner> runnable;
    for (Runner& r : runners) {
      if (r.run) {
        runnable.push_back(std::move(r));
      } else if (!options.quiet) {
        std::cout << "  (" << r.impl << " skipped for " << op_name(c.op) << " "
                  << dtype_name(c.dtype) << ": " << r.note << ")\n";
      }
    }
    if (runnable.size() == ceiling_count) continue;  // nothing implements this case
    if (probing) {
      const auto first = runnable.begin() + static_cast<std::ptrdiff_t>(ceiling_count);
      const std::vector<Runner> implementations(first, runnable.end());
      probe_heap(std::cout,
                 op_name(c.op) + " " + dtype_name(c.dtype) + " " + std::to_string(c.rows) + "x" +
                     std::to_string(c.dim) + " t=" + std::to_string(c.threads),
                 implementations, options.heap_probe_calls);
      continue;
    }
    // What the implementations' prepared state holds (PyTorch's kept autograd graphs, above all).
    const int64_t held_in_case = current_rss_bytes();
    max_prepared = std::max(max_prepared, held_in_case - rss_before_setup);
    const std::vector<Measurement> measured = measure_interleaved(runnable, measure);
    for (const Measurement& m : measured) {
      peak_by_impl[m.impl] = std::max(peak_by_impl[m.impl], m.peak_rss_bytes);
      extra_by_impl[m.impl] = std::max(extra_by_impl[m.impl], m.extra_rss_bytes);
    }
    std::vector<Record> case_records = make_records(c, measured);
    if (options.quiet) {
      std::cout << "[" << index << "/" << cases.size() << "] " << op_name(c.op) << " "
                << dtype_name(c.dtype) << " D=" << c.dim
                << (c.decode     ? " rows=" + std::to_string(c.rows) + " (decode)"
                    : c.in_cache ? " (in cache)"
                                 : "")
                << " t=" << c.threads << std::endl;
    } else {
      print_case(std::cout, case_records);
      std::cout.flush();
    }
    records.insert(records.end(), case_records.begin(), case_records.end());
  }
  if (probing) return 0;  // a diagnostic: nothing was timed
  if (spawn_child) {
    const std::vector<Record> child = run_tuned_child(options);
    records.insert(records.end(), child.begin(), child.end());
  }

  // Memory: the workspace is what the benchmark holds; the libraries' own code and data are the
  // baseline; anything above is allocated by an implementation while it runs.
  int64_t peak_without_torch = 0;
  for (const auto& [impl, peak] : peak_by_impl) {
    if (impl.rfind("torch", 0) != 0) peak_without_torch = std::max(peak_without_torch, peak);
  }
  nlohmann::json memory = {{"baseline_rss_bytes", baseline_rss},
                           {"workspace_bytes", ws.held_bytes()},
                           {"peak_rss_bytes", process_peak_rss_bytes()},
                           {"peak_rss_without_torch_bytes", peak_without_torch},
                           {"max_prepared_state_bytes", max_prepared},
                           {"max_extra_rss_bytes_by_impl", extra_by_impl}};
  if (!options.child) {
    std::cout << "\n== summary: " << machine << "\n   GB/s (decode: ns per call); in brackets, "
              << "the time relative to addnorm's in the same run (torch-tuned: in its own run); "
                 "F! = page faults ==\n";
    print_summary(std::cout, records, options.impls, false);
    std::cout << "\nmemory: libraries " << format_mib(baseline_rss) << " MiB + workspace "
              << format_mib(ws.held_bytes()) << " MiB + prepared state (PyTorch's kept graphs) "
              << "up to " << format_mib(max_prepared) << " MiB; whole-process peak "
              << format_mib(process_peak_rss_bytes()) << " MiB\n"
              << "  most memory one timed call added (fresh outputs, scratch):";
    for (const auto& [impl, extra] : extra_by_impl) {
      std::cout << " " << impl << " " << format_mib(extra) << " MiB;";
    }
    std::cout << "\n";
  }
  // Only the top-level process judges faults: it holds the child's records too.
  const int fault_errors = options.child ? 0 : report_faults(std::cout, records);
  if (!options.markdown_path.empty()) {
    std::ofstream md(options.markdown_path);
    md << machine << ". GB/s (decode rows: ns per call); in brackets, the time relative to "
       << "addnorm's in the same run; F! = page faults beyond the allowance.\n\n";
    print_summary(md, records, options.impls, true);
  }
  if (!options.json_path.empty()) {
    nlohmann::json document = {
        {"meta",
         {{"cpu", cpu_model()},
          {"cpu_family", cpu_family()},
          {"simd_target", addnorm_simd_target()},
          {"fault_cost_s", kFaultCostS},
          {"fault_allowance_share", kFaultAllowanceShare},
          {"fault_errors", fault_errors},
          {"cpus", omp_get_num_procs()},
          {"copy_isa", copy_isa()},
          {"onednn", dnnl_text},
          {"torch", torch_version()},
          {"glibc_tunables", std::getenv("GLIBC_TUNABLES") ? std::getenv("GLIBC_TUNABLES") : ""},
          {"load_average_at_start", load_at_start},
          {"load_average_at_end", load_average()},
          {"tensor_mib", options.tensor_mib},
          {"in_cache_mib", options.in_cache_mib},
          {"memory", memory}}},
        {"records", nlohmann::json::array()}};
    for (const Record& r : records) document["records"].push_back(record_json(r));
    if (options.json_path == "-") {
      std::cout << document.dump(1) << "\n";
    } else {
      std::ofstream(options.json_path) << document.dump(1) << "\n";
    }
  }
  // A smoke run proves the benchmark runs; one sample per case is too few to judge faults by.
  if (fault_errors > 0 && !options.smoke) {
    std::cerr << "addnorm-bench: error: " << fault_errors
              << " timed loop(s) took page faults beyond the allowance (listed above)\n";
    return 3;
  }
  return 0;
}

}  // namespace
}  // namespace addnorm::bench

int main(int argc, char** argv) {
  try {
    return addnorm::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "addnorm-bench: error: " << e.what() << "\n";
    return 1;
  }
}
