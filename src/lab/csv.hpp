// CSV text for the experiments' results: a header line, then one row per measured value,
// numbers in the shortest form that reads back to the same float64.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "ops/shortest_text.hpp"

namespace addnorm::lab {

inline std::string csv_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return shortest_text(value);
}

class CsvWriter {
 public:
  explicit CsvWriter(const std::vector<std::string>& header) { add_cells(header); }

  // Cells are numbers or plain words (no commas or quotes: the experiments' names never have any).
  CsvWriter& cell(const std::string& text) {
    line_ += (line_.empty() ? "" : ",") + text;
    return *this;
  }
  CsvWriter& cell(double value) { return cell(csv_number(value)); }
  CsvWriter& cell(int value) { return cell(std::to_string(value)); }
  CsvWriter& cell(int64_t value) { return cell(std::to_string(value)); }
  CsvWriter& cell(uint64_t value) { return cell(std::to_string(value)); }
  void end_row() {
    text_ += line_ + "\n";
    line_.clear();
  }
  const std::string& text() const { return text_; }

 private:
  void add_cells(const std::vector<std::string>& cells) {
    for (const std::string& c : cells) cell(c);
    end_row();
  }
  std::string line_, text_;
};

}  // namespace addnorm::lab
