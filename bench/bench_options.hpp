// The benchmark's command line: filters (ops, dims, threads, impls, dtypes), run length (--quick,
// --smoke, --reps, --case-seconds) and outputs (--json, --markdown).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_case.hpp"

namespace addnorm::bench {

// Every implementation the benchmark knows, in report order.
const std::vector<std::string>& all_impls();

struct BenchOptions {
  // The cases: the grid of ops x dims x dtypes, or the case table's timed ones
  // (bench/case_table.hpp; its row lengths and storage types, filtered by ops and threads).
  bool table_cases = false;
  std::vector<Op> ops;
  std::vector<int64_t> dims;
  std::vector<int> threads;
  std::vector<std::string> impls;
  std::vector<DType> dtypes;
  double tensor_mib = 64;  // one [rows, dim] float32 tensor, out of cache
  bool in_cache = true;    // also run the in-cache case
  double in_cache_mib = 1;
  int64_t in_cache_dim = 1024;
  // Decode cases (LayerNorm and RMSNorm forward, ns/call): rows x dims, every dtype and thread
  // count of the run.
  bool decode = true;
  std::vector<int64_t> decode_rows;
  std::vector<int64_t> decode_dims;
  int reps = 9;
  double case_seconds = 2.0;
  bool quiet = false;     // no per-case blocks, only progress and the summary
  std::string json_path;  // "-" for stdout
  std::string markdown_path;
  bool smoke = false;
  // Diagnostic: call each implementation this many times per case, untimed, and print every
  // call's page faults and heap growth instead of timing (heap_probe.hpp). 0: time as usual.
  int heap_probe_calls = 0;
  // Internal: this process is the allocator-tuned PyTorch pass started by the main run.
  bool child = false;
};

// Parses argv; returns false when the program should exit (--help, --list) with `exit_code`.
bool parse_options(int argc, char** argv, BenchOptions& options, int& exit_code);

// The arguments that make a child process run the same cases for `impls`, writing JSON to
// json_path.
std::vector<std::string> child_arguments(const BenchOptions& options,
                                         const std::vector<std::string>& impls,
                                         const std::string& json_path);

bool wants_impl(const BenchOptions& options, const std::string& impl);

}  // namespace addnorm::bench
