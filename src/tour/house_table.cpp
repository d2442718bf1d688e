// The house table through addnorm::batch_norm (each column over the three houses) and
// addnorm::layer_norm (each house over its three features), both with eps 0 so that they match
// the page's (H - mean) / std with NumPy's population std.
#include "tour/house_table.hpp"

#include "addnorm/ops.hpp"
#include "tour/float_arrays.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {

HouseTable house_table() {
  constexpr int rows = HouseTable::kHouses, cols = HouseTable::kFeatures;
  HouseTable house;
  house.table = {1200, 2.0, 45, 1500, 3.0, 70, 2000, 3.5, 80};
  const Shape shape{rows, cols};
  const Tensor x = to_tensor(house.table, shape);

  Tensor bn(shape), column_mean({cols}), column_rstd({cols});
  BatchNormOptions batch_options;
  batch_options.training = true;
  batch_options.eps = 0.0f;
  batch_norm(x.view(), bn.view(), batch_options, std::nullopt,
             NormStats{column_mean.view(), column_rstd.view()});
  house.batch_norm = to_doubles(bn);
  for (int col = 0; col < cols; ++col) {
    house.column_mean.push_back(column_mean[col]);
    house.column_std.push_back(1.0 / column_rstd[col]);
    const std::vector<double> column = column_of(house.batch_norm, rows, cols, col);
    house.batch_norm_column_means.push_back(mean_of(column));
    house.batch_norm_column_stds.push_back(std_of(column));
  }

  Tensor ln(shape);
  NormOptions layer_options;
  layer_options.eps = 0.0f;
  layer_norm(x.view(), Shape{cols}, ln.view(), layer_options);
  house.layer_norm = to_doubles(ln);
  for (int row = 0; row < rows; ++row) {
    const std::vector<double> values = row_of(house.layer_norm, cols, row);
    house.layer_norm_row_means.push_back(mean_of(values));
    house.layer_norm_row_stds.push_back(std_of(values));
  }
  return house;
}

std::string house_page_lines(const HouseTable& house) {
  constexpr int rows = HouseTable::kHouses, cols = HouseTable::kFeatures;
  std::string text;
  // print("...:\n", array) puts a space before the array's first line.
  text += "batch norm (per column):\n " + numpy_str(numpy_round(house.batch_norm, 4), rows, cols) +
          "\n";
  text += "column means: " + numpy_str(plus_zero(numpy_round(house.batch_norm_column_means, 4))) +
          "  column stds: " + numpy_str(numpy_round(house.batch_norm_column_stds, 4)) + "\n";
  text +=
      "layer norm (per row):\n " + numpy_str(numpy_round(house.layer_norm, 4), rows, cols) + "\n";
  text += "row means: " + numpy_str(plus_zero(numpy_round(house.layer_norm_row_means, 4))) +
          "  row stds: " + numpy_str(numpy_round(house.layer_norm_row_stds, 4)) + "\n";
  return text;
}

std::string house_text(const HouseTable& house) {
  constexpr int rows = HouseTable::kHouses, cols = HouseTable::kFeatures;
  std::string text;
  text += "rows = 3 houses (the batch), columns = size (sq ft), rooms, price (lakhs):\n " +
          numpy_str(house.table, rows, cols) + "\n";
  text +=
      "batch norm: addnorm::batch_norm, training mode, eps 0, x shaped (N=3, C=3); "
      "layer norm: addnorm::layer_norm over each row, eps 0\n\n";
  text += house_page_lines(house) + "\n";
  text += "batch statistics per column (the op's): mean " +
          numpy_str(numpy_round(house.column_mean, 4)) + ", std " +
          numpy_str(numpy_round(house.column_std, 4)) + "\n";
  text += "house size becomes " + prose_list(column_of(house.batch_norm, rows, cols, 0), 4) +
          ": the z-scores of 1200, 1500 and 2000\n";
  std::vector<double> typical_row;
  for (int col = 0; col < cols; ++col) {
    typical_row.push_back(mean_of(column_of(house.layer_norm, rows, cols, col)));
  }
  text +=
      "layer norm mixes square feet with rooms and lakhs, so every house looks the same: about " +
      prose_list(typical_row, 2) + "\n";
  return text;
}

nlohmann::json house_json(const HouseTable& house) {
  return {{"table", house.table},
          {"shape", {HouseTable::kHouses, HouseTable::kFeatures}},
          {"batch_norm", house.batch_norm},
          {"column_mean", house.column_mean},
          {"column_std", house.column_std},
          {"batch_norm_column_means", house.batch_norm_column_means},
          {"batch_norm_column_stds", house.batch_norm_column_stds},
          {"layer_norm", house.layer_norm},
          {"layer_norm_row_means", house.layer_norm_row_means},
          {"layer_norm_row_stds", house.layer_norm_row_stds}};
}

}  // namespace addnorm::tour
