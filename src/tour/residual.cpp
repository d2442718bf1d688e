// The residual add of page 001's concrete example, done by addnorm::add in float32.
#include "tour/residual.hpp"

#include "addnorm/ops.hpp"
#include "tour/float_arrays.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {

ResidualExample residual_example() {
  ResidualExample example;
  example.input = {1.0, 2.0};
  example.layer_output = {0.1, 0.3};
  const Tensor x = to_tensor(example.input, {2});
  const Tensor layer_output = to_tensor(example.layer_output, {2});
  Tensor out({2});
  add(x.view(), layer_output.view(), out.view());
  example.with_residual = to_doubles(out);
  return example;
}

std::string residual_text(const ResidualExample& example) {
  const std::string x = python_list(example.input);
  const std::string f = python_list(example.layer_output);
  std::string text;
  text += "input x = " + x + ", the layer transforms it to f(x) = " + f + "\n";
  text += "without residual: output = f(x)     = " + f + "  (the input is replaced)\n";
  text += "with residual:    output = x + f(x) = " + x + " + " + f + " = " +
          python_list_float32(example.with_residual) + "  (addnorm::add; the input is kept)\n";
  text += "the gradient through x + f(x) is 1 + f'(x): about 1 even when f'(x) is tiny.\n";
  return text;
}

nlohmann::json residual_json(const ResidualExample& example) {
  return {{"input", example.input},
          {"layer_output", example.layer_output},
          {"with_residual", example.with_residual}};
}

}  // namespace addnorm::tour
