// Terminal rendering shared by the `addnorm lab-run` experiments: numbers, bars, aligned tables,
// the common output options (--json, --csv) and a progress bar on stderr.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "addnorm/lab/progress.hpp"
#include "addnorm/lab/seed_spread.hpp"

namespace addnorm::cli {

// "%.*g"-style text: general(0.000862, 3) is "0.000862", general(6.86e-14, 3) is "6.86e-14".
std::string general(double value, int significant = 3);
// Python's f"{x:.2e}": scientific_text(0.000862, 2) is "8.62e-04".
std::string scientific_text(double value, int decimals);
// Fixed decimals: fixed_text(2.5, 2) is "2.50".
std::string fixed_text(double value, int decimals);

// "median [q25, q75]" in 3 significant digits; just the value for one seed.
std::string spread_text(const lab::Spread& spread);

// A bar of '#' proportional to value / max (at most `width` characters).
std::string linear_bar(double value, double max, int width = 30);
// A bar on a log scale between low and high (both > 0): low gives 1 character, high `width`.
std::string log_scale_bar(double value, double low, double high, int width = 30);

// A table with aligned columns: the first column left-aligned, the others right-aligned, except
// columns whose header starts with '|' (bars), which are left-aligned and printed as they are.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render(const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Rows to print for a curve of `count` points: all when count <= max_rows, otherwise evenly
// spaced ones that always include the first and the last.
std::vector<size_t> sampled_rows(size_t count, size_t max_rows = 25);

// --json / --csv / --plot, added to every experiment's subcommand.
struct OutputOptions {
  bool json = false;
  bool csv = false;
  std::string plot;  // a .svg or .png file to draw the result into (scripts/lab_plot.py)
};
void add_output_options(CLI::App& command, OutputOptions& options);
// Prints json, csv or text according to the options, and draws the plot when one was asked for.
void print_result(const OutputOptions& options, const nlohmann::json& json, const std::string& csv,
                  const std::string& text);

// A progress bar on stderr that appears only once a run has taken more than a second, so quick
// runs print nothing extra. progress() hands the experiment its callback.
class ProgressBar {
 public:
  ProgressBar() : start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { finish(); }
  lab::Progress progress();
  // Clears the bar's line (if it was shown), so that what is printed next starts clean.
  void finish();

 private:
  void update(double fraction, std::string_view stage);
  std::chrono::steady_clock::time_point start_;
  bool shown_ = false;
  int last_percent_ = -1;
};

}  // namespace addnorm::cli
