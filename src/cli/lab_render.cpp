// Text helpers for `addnorm lab-run`: everything the experiments' terminal views share.
#include "cli/lab_render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli/lab_plot.hpp"

namespace addnorm::cli {

std::string general(double value, int significant) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", significant, value);
  return buffer;
}

std::string scientific_text(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*e", decimals, value);
  return buffer;
}

std::string fixed_text(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string spread_text(const lab::Spread& spread) {
  if (spread.count <= 1) return general(spread.median);
  return general(spread.median) + " [" + general(spread.low) + ", " + general(spread.high) + "]";
}

std::string linear_bar(double value, double max, int width) {
  if (!std::isfinite(value) || !(max > 0.0)) return std::isfinite(value) ? "" : "(inf/nan)";
  const double length = std::clamp(value / max, 0.0, 1.0) * width;
  return std::string(static_cast<size_t>(std::lround(length)), '#');
}

std::string log_scale_bar(double value, double low, double high, int width) {
  if (!std::isfinite(value)) return "(inf/nan)";
  if (!(value > 0.0)) return "";
  if (!(high > low)) return std::string(static_cast<size_t>(width), '#');
  const double position =
      (std::log10(value) - std::log10(low)) / (std::log10(high) - std::log10(low));
  const double length = 1.0 + std::clamp(position, 0.0, 1.0) * (width - 1);
  return std::string(static_cast<size_t>(std::lround(length)), '#');
}

std::string TextTable::render(const std::string& indent) const {
  std::vector<size_t> widths(header_.size(), 0);
  const auto measure = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  const auto line = [&](const std::vector<std::string>& row) {
    std::string text = indent;
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      const bool left = c == 0 || (!header_[c].empty() && header_[c][0] == '|');
      const std::string padding(widths[c] - row[c].size(), ' ');
      if (c > 0) text += "  ";
      text += left ? row[c] + (c + 1 == row.size() ? "" : padding) : padding + row[c];
    }
    return text + "\n";
  };
  std::string text = line(header_);
  for (const auto& row : rows_) text += line(row);
  return text;
}

std::vector<size_t> sampled_rows(size_t count, size_t max_rows) {
  std::vector<size_t> rows;
  if (count <= max_rows) {
    for (size_t i = 0; i < count; ++i) rows.push_back(i);
    return rows;
  }
  for (size_t i = 0; i < max_rows; ++i) {
    const size_t row = (i * (count - 1) + (max_rows - 1) / 2) / (max_rows - 1);
    if (rows.empty() || rows.back() != row) rows.push_back(row);
  }
  return rows;
}

void add_output_options(CLI::App& command, OutputOptions& options) {
  command.add_flag("--json", options.json, "Print the result as JSON");
  command.add_flag("--csv", options.csv, "Print the result as CSV (one row per measured value)");
  command
      .add_option("--plot", options.plot,
                  "Also draw the result into FILE.svg or FILE.png (needs python3-matplotlib)")
      ->check(check_plot_file);
}

void print_result(const OutputOptions& options, const nlohmann::json& json, const std::string& csv,
                  const std::string& text) {
  if (options.json && options.csv)
    throw CLI::ValidationError("--json and --csv exclude each other");
  if (options.json) {
    std::cout << json.dump(2) << "\n";
  } else if (options.csv) {
    std::cout << csv;
  } else {
    std::cout << text;
  }
  if (!options.plot.empty()) plot_result(json, options.plot);
}

void ProgressBar::finish() {
  if (shown_) std::cerr << "\r" << std::string(79, ' ') << "\r" << std::flush;
  shown_ = false;
}

lab::Progress ProgressBar::progress() {
  return [this](double fraction, std::string_view stage) { update(fraction, stage); };
}

void ProgressBar::update(double fraction, std::string_view stage) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!shown_ && elapsed < 1.0) return;
  const int percent = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 100.0);
  if (shown_ && percent == last_percent_) return;
  shown_ = true;
  last_percent_ = percent;
  constexpr int kWidth = 30;
  const int filled = percent * kWidth / 100;
  std::string line = "\r[" + std::string(static_cast<size_t>(filled), '#') +
                     std::string(static_cast<size_t>(kWidth - filled), ' ') + "] " +
                     std::to_string(percent) + "% " + std::string(stage);
  if (line.size() < 79) line += std::string(79 - line.size(), ' ');
  std::cerr << line << std::flush;
}

}  // namespace addnorm::cli
