// Results: one record per (case, implementation), the per-case text block, the summary table
// (text and Markdown) and the JSON document.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "bench_case.hpp"
#include "measure.hpp"

namespace addnorm::bench {

struct Record {
  Case c;
  std::string impl;
  std::string note;
  std::string run = "main";        // "main", or "torch-tuned" for the allocator-tuned child process
  bool ceiling_component = false;  // one of the copy kernels that make up the ceiling
  double bytes = 0;                // counted by the byte model (2x the buffer for a copy)
  double median_s = 0;
  double gbps = 0;
  double ceiling_gbps = 0;
  double pct_of_ceiling = 0;
  int samples = 0;
  std::vector<double> sample_seconds;  // each sample's seconds per call: the median's spread
  int calls_per_sample = 1;
  double faults_per_call = 0;
  int64_t extra_rss_bytes = 0;
  std::map<std::string, double> ratios;  // this median / that implementation's, same run
};

// The allowance of measure.hpp, applied to a record.
double fault_allowance_per_call(const Record& r);
bool faults_beyond_allowance(const Record& r);
// Flagged faults make the run fail, except PyTorch's as installed (its fresh outputs above 32 MiB
// are mmapped: that is what "as installed" measures, docs/performance.md).
bool faults_are_error(const Record& r);
// Lists every flagged record (an "error:" line for each that fails the run); returns how many fail.
int report_faults(std::ostream& out, const std::vector<Record>& records);

// Turns a case's measurements (ceiling components first, named "copy", "copy-nt", "memcpy")
// into records with GB/s, the ceiling (the best copy), % of it and same-run ratios.
std::vector<Record> make_records(const Case& c, const std::vector<Measurement>& measurements);

void print_case(std::ostream& out, const std::vector<Record>& records);
// One line per case: the ceiling, addnorm's GB/s and % of it, and for each other implementation
// its GB/s and how many times longer than addnorm it took (same run).
void print_summary(std::ostream& out, const std::vector<Record>& records,
                   const std::vector<std::string>& impls, bool markdown);

nlohmann::json record_json(const Record& r);
Record record_from_json(const nlohmann::json& j);

}  // namespace addnorm::bench
