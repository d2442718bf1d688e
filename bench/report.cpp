// Formatting of results (see report.hpp).
#include "report.hpp"

#include <algorithm>
#include <cstdio>

namespace addnorm::bench {
namespace {

bool is_ceiling(const std::string& impl) {
  return impl == "copy" || impl == "copy-nt" || impl == "memcpy";
}

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string pad(std::string text, size_t width, bool left = false) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return left ? text + fill : fill + text;
}

std::string case_title(const Case& c) {
  const double mib = double(c.elements() * dtype_bytes(c.dtype)) / double(1 << 20);
  return op_name(c.op) + "  " + dtype_name(c.dtype) + "  " + std::to_string(c.rows) + " x " +
         std::to_string(c.dim) + " (" + format("%.3g", mib) + " MiB" +
         (c.decode     ? ", decode"
          : c.in_cache ? ", in cache"
                       : "") +
         ")  " + std::to_string(c.threads) + (c.threads == 1 ? " thread" : " threads");
}

bool same_case(const Case& a, const Case& b) {
  return a.op == b.op && a.dtype == b.dtype && a.rows == b.rows && a.dim == b.dim &&
         a.threads == b.threads && a.in_cache == b.in_cache && a.decode == b.decode;
}

// A decode case is read as time per call; every other case as GB/s.
std::string speed_text(const Record& r) {
  return r.c.decode ? format("%.0f ns", r.median_s * 1e9) : format("%.1f", r.gbps);
}

// The mark a record with too many page faults gets in every table.
std::string fault_mark(const Record& r) {
  return faults_beyond_allowance(r) ? " F!" : "";
}

std::string case_label(const Case& c) {
  return op_name(c.op) + " " + dtype_name(c.dtype) + " " + std::to_string(c.rows) + "x" +
         std::to_string(c.dim) +
         (c.decode     ? " decode"
          : c.in_cache ? " in cache"
                       : "") +
         " t=" + std::to_string(c.threads);
}

}  // namespace

double fault_allowance_per_call(const Record& r) {
  return fault_allowance_per_call(r.median_s);
}

bool faults_beyond_allowance(const Record& r) {
  return r.faults_per_call > fault_allowance_per_call(r);
}

bool faults_are_error(const Record& r) {
  return faults_beyond_allowance(r) && r.impl != "torch";
}

int report_faults(std::ostream& out, const std::vector<Record>& records) {
  int errors = 0;
  bool header = false;
  for (const Record& r : records) {
    if (!faults_beyond_allowance(r)) continue;
    if (!header) {
      out << "\nFAULTS (F!): timed loops with more minor page faults than the allowance (at "
          << format("%.0f", kFaultCostS * 1e6) << " us each, more than "
          << format("%.0f", kFaultAllowanceShare * 100) << "% of the call's time):\n";
      header = true;
    }
    const bool error = faults_are_error(r);
    errors += error ? 1 : 0;
    out << (error ? "error: " : "  ") << pad(r.impl, 12, true) << " " << case_label(r.c) << ": "
        << format("%.1f", r.faults_per_call) << " faults/call (allowance "
        << format("%.2f", fault_allowance_per_call(r)) << ")"
        << (error ? "; its time measures the allocator, not the op"
                  : " (PyTorch as installed: expected for outputs glibc mmaps)")
        << "\n";
  }
  return errors;
}

std::vector<Record> make_records(const Case& c, const std::vector<Measurement>& measurements) {
  const double op_bytes = counted_bytes(c);
  const double copy_bytes = 2.0 * double(c.elements() * dtype_bytes(c.dtype));
  std::vector<Record> records;
  double ceiling = 0;
  for (const Measurement& m : measurements) {
    Record r;
    r.c = c;
    r.impl = m.impl;
    r.note = m.note;
    r.ceiling_component = is_ceiling(m.impl);
    r.bytes = r.ceiling_component ? copy_bytes : op_bytes;
    r.median_s = m.median_s;
    r.gbps = m.median_s > 0 ? r.bytes / m.median_s / 1e9 : 0;
    r.samples = static_cast<int>(m.seconds_per_call.size());
    r.sample_seconds = m.seconds_per_call;
    r.calls_per_sample = m.calls_per_sample;
    r.faults_per_call = m.faults_per_call;
    r.extra_rss_bytes = m.extra_rss_bytes;
    if (r.ceiling_component) ceiling = std::max(ceiling, r.gbps);
    records.push_back(r);
  }
  for (Record& r : records) {
    r.ceiling_gbps = ceiling;
    r.pct_of_ceiling = ceiling > 0 ? 100.0 * r.gbps / ceiling : 0;
    for (const Record& other : records) {
      if (&other == &r || other.ceiling_component || r.ceiling_component) continue;
      if (other.median_s > 0) r.ratios[other.impl] = r.median_s / other.median_s;
    }
  }
  return records;
}

void print_case(std::ostream& out, const std::vector<Record>& records) {
  if (records.empty()) return;
  const Case& c = records.front().c;
  out << "\n"
      << case_title(c) << "\n  bytes: " << byte_model(c.op).description << " = "
      << format("%.1f", records.front().bytes > 0 ? counted_bytes(c) / double(1 << 20) : 0)
      << " MiB\n  ceiling " << format("%.1f", records.front().ceiling_gbps) << " GB/s (";
  bool first = true;
  for (const Record& r : records) {
    if (!r.ceiling_component) continue;
    out << (first ? "" : ", ") << r.impl << " " << format("%.1f", r.gbps);
    first = false;
  }
  out << ")\n";
  out << "  " << pad("impl", 12, true) << pad("median us", 11) << pad("GB/s", 8) << pad("% ceil", 8)
      << pad("addnorm x", 11) << pad("faults", 9) << pad("+MiB", 8) << "  note\n";
  for (const Record& r : records) {
    if (r.ceiling_component) continue;
    const auto addnorm = r.ratios.find("addnorm");
    const std::string speed = r.impl == "addnorm"         ? "1.00"
                              : addnorm != r.ratios.end() ? format("%.2f", addnorm->second)
                                                          : "-";
    out << "  " << pad(r.impl, 12, true) << pad(format("%.2f", r.median_s * 1e6), 11)
        << pad(format("%.1f", r.gbps), 8) << pad(format("%.0f%%", r.pct_of_ceiling), 8)
        << pad(speed, 11) << pad(format("%.0f", r.faults_per_call), 9)
        << pad(format("%.1f", double(r.extra_rss_bytes) / double(1 << 20)), 8) << "  " << r.note
        << (faults_beyond_allowance(r) ? "  << FAULTS" : "") << "\n";
  }
}

void print_summary(std::ostream& out, const std::vector<Record>& records,
                   const std::vector<std::string>& impls, bool markdown) {
  // The cases in first-seen order, each with its main-run records and any child-run records.
  std::vector<Case> cases;
  for (const Record& r : records) {
    if (std::none_of(cases.begin(), cases.end(),
                     [&](const Case& c) { return same_case(c, r.c); })) {
      cases.push_back(r.c);
    }
  }
  std::vector<std::string> others;
  for (const std::string& impl : impls) {
    if (impl != "addnorm") others.push_back(impl);
  }
  const char* sep = markdown ? " | " : "  ";
  if (markdown) out << "| ";
  out << (markdown ? "op" : pad("op", 21, true)) << sep << "dtype" << sep
      << (markdown ? "D" : pad("D", 5)) << sep << (markdown ? "rows" : pad("rows", 7)) << sep
      << "thr" << sep << (markdown ? "ceiling GB/s" : pad("ceiling", 7)) << sep
      << (markdown ? "addnorm GB/s (% ceil)" : pad("addnorm (%ceil)", 15));
  for (const std::string& impl : others) out << sep << (markdown ? impl : pad(impl, 15));
  out << (markdown ? " |\n" : "\n");
  if (markdown) {
    out << "|---|---|--:|--:|--:|--:|--:|";
    for (size_t i = 0; i < others.size(); ++i) out << "--:|";
    out << "\n";
  }
  for (const Case& c : cases) {
    const Record* addnorm = nullptr;
    double ceiling = 0;
    for (const Record& r : records) {
      if (!same_case(r.c, c) || r.run != "main") continue;
      ceiling = r.ceiling_gbps;
      if (r.impl == "addnorm") addnorm = &r;
    }
    if (markdown) out << "| ";
    const std::string rows_text =
        std::to_string(c.rows) + (c.decode     ? (markdown ? " (decode)" : "d")
                                  : c.in_cache ? (markdown ? " (in cache)" : "c")
                                               : "");
    // A decode case's copy ceiling (a few KiB in L1) says nothing; its cells are ns per call.
    const std::string ceiling_text = c.decode ? "-" : format("%.1f", ceiling);
    const std::string addnorm_text = !addnorm   ? "-"
                                     : c.decode ? speed_text(*addnorm) + fault_mark(*addnorm)
                                                : speed_text(*addnorm) + " (" +
                                                      format("%.0f", addnorm->pct_of_ceiling) +
                                                      "%)" + fault_mark(*addnorm);
    out << (markdown ? op_name(c.op) : pad(op_name(c.op), 21, true)) << sep
        << pad(dtype_name(c.dtype), 5, true) << sep
        << (markdown ? std::to_string(c.dim) : pad(std::to_string(c.dim), 5)) << sep
        << (markdown ? rows_text : pad(rows_text, 7)) << sep << pad(std::to_string(c.threads), 3)
        << sep << pad(ceiling_text, 7) << sep << pad(addnorm_text, 15);
    for (const std::string& impl : others) {
      std::string cell = "-";
      for (const Record& r : records) {
        if (!same_case(r.c, c) || r.impl != impl) continue;
        const auto ratio = r.ratios.find("addnorm");
        cell = speed_text(r) +
               (ratio != r.ratios.end() ? " (" + format("%.2f", ratio->second) + "x)" : "") +
               fault_mark(r);
      }
      out << sep << pad(cell, 15);
    }
    out << (markdown ? " |\n" : "\n");
  }
}

nlohmann::json record_json(const Record& r) {
  return {{"op", r.ceiling_component ? "ceiling" : op_name(r.c.op)},
          {"case_op", op_name(r.c.op)},
          {"impl", r.impl},
          {"dtype", dtype_name(r.c.dtype)},
          {"rows", r.c.rows},
          {"dim", r.c.dim},
          {"threads", r.c.threads},
          {"in_cache", r.c.in_cache},
          {"decode", r.c.decode},
          {"run", r.run},
          {"note", r.note},
          {"median_s", r.median_s},
          {"bytes", r.bytes},
          {"gbps", r.gbps},
          {"ceiling_gbps", r.ceiling_gbps},
          {"pct_of_ceiling", r.pct_of_ceiling},
          {"samples", r.samples},
          {"sample_seconds", r.sample_seconds},
          {"calls_per_sample", r.calls_per_sample},
          {"faults_per_call", r.faults_per_call},
          {"fault_allowance_per_call", fault_allowance_per_call(r)},
          {"faults_beyond_allowance", faults_beyond_allowance(r)},
          {"extra_rss_bytes", r.extra_rss_bytes},
          {"ratios", r.ratios}};
}

Record record_from_json(const nlohmann::json& j) {
  Record r;
  r.c.op = op_from_name(j.at("case_op").get<std::string>());
  r.c.dtype = dtype_from_name(j.at("dtype").get<std::string>());
  r.c.rows = j.at("rows").get<int64_t>();
  r.c.dim = j.at("dim").get<int64_t>();
  r.c.threads = j.at("threads").get<int>();
  r.c.in_cache = j.at("in_cache").get<bool>();
  r.c.decode = j.at("decode").get<bool>();
  r.impl = j.at("impl").get<std::string>();
  r.note = j.at("note").get<std::string>();
  r.run = j.at("run").get<std::string>();
  r.ceiling_component = j.at("op").get<std::string>() == "ceiling";
  r.bytes = j.at("bytes").get<double>();
  r.median_s = j.at("median_s").get<double>();
  r.gbps = j.at("gbps").get<double>();
  r.ceiling_gbps = j.at("ceiling_gbps").get<double>();
  r.pct_of_ceiling = j.at("pct_of_ceiling").get<double>();
  r.samples = j.at("samples").get<int>();
  r.sample_seconds = j.value("sample_seconds", std::vector<double>{});
  r.calls_per_sample = j.at("calls_per_sample").get<int>();
  r.faults_per_call = j.at("faults_per_call").get<double>();
  r.extra_rss_bytes = j.at("extra_rss_bytes").get<int64_t>();
  r.ratios = j.at("ratios").get<std::map<std::string, double>>();
  return r;
}

}  // namespace addnorm::bench
