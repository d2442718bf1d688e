// Section "house": page 000's house table normalised per column (batch norm) and per row
// (layer norm), printed as the page's matrices.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace addnorm::tour {

struct HouseTable {
  static constexpr int kHouses = 3;    // rows, the batch
  static constexpr int kFeatures = 3;  // columns: size (sq ft), rooms, price (lakhs)
  std::vector<double> table;           // 3 x 3, C order
  // addnorm::batch_norm in training mode, eps 0, x shaped (N = 3, C = 3).
  std::vector<double> batch_norm;
  std::vector<double> column_mean;              // the op's batch statistics, per column
  std::vector<double> column_std;               // 1 / rstd
  std::vector<double> batch_norm_column_means;  // of the normalised table, np.mean(axis=0)
  std::vector<double> batch_norm_column_stds;   // np.std(axis=0)
  // addnorm::layer_norm over each row, eps 0.
  std::vector<double> layer_norm;
  std::vector<double> layer_norm_row_means;  // np.mean(axis=1)
  std::vector<double> layer_norm_row_stds;   // np.std(axis=1)
};

HouseTable house_table();
// The page's printed lines, "batch norm (per column):" to the row stds.
std::string house_page_lines(const HouseTable& house);
std::string house_text(const HouseTable& house);
nlohmann::json house_json(const HouseTable& house);

}  // namespace addnorm::tour
