// `--plot FILE`: the experiments' figures are drawn by scripts/lab_plot.py (matplotlib) from the
// result's JSON, the same JSON `--json` prints, so the figure shows exactly what was measured.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace addnorm::cli {

// For CLI11's check(): "" when file ends in .svg or .png, otherwise the error to show.
std::string check_plot_file(const std::string& file);

// Writes result to a temporary file and runs /usr/bin/python3 lab_plot.py RESULT FILE. The
// script is $ADDNORM_PLOT_SCRIPT when set, otherwise the source tree's scripts/lab_plot.py.
// Throws Error when the script fails (its message is on stderr).
void plot_result(const nlohmann::json& result, const std::string& file);

}  // namespace addnorm::cli
