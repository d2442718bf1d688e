// The list of the tour's sections and the text and JSON around them.
#include "tour/tour.hpp"

#include <array>

#include "addnorm/error.hpp"
#include "tour/activation_growth.hpp"
#include "tour/cat_layer_norm.hpp"
#include "tour/gradient_flow.hpp"
#include "tour/house_table.hpp"
#include "tour/normalization_steps.hpp"
#include "tour/residual.hpp"
#include "tour/residual_blocks.hpp"
#include "tour/rms_vs_layer_norm.hpp"

namespace addnorm::tour {
namespace {

const std::array<TourSection, 8> kSections = {{
    {"residual", "Adding the input back with a residual connection",
     "page 001, \"The solution: add a shortcut\"; page 000, \"Adding the input back\"",
     "A residual connection adds the layer's output to its input, so the input survives.",
     [] { return residual_text(residual_example()); },
     [] { return residual_json(residual_example()); }},
    {"cat", "Layer normalization of the token \"cat\"",
     "page 000, \"Layer normalization of cat in NumPy\"",
     "LayerNorm's four steps on one token (mean, variance, normalise, scale and shift), and the "
     "gamma and beta that undo them.",
     [] { return cat_text(cat_layer_norm()); }, [] { return cat_json(cat_layer_norm()); }},
    {"house", "Normalizing the house table both ways",
     "page 000, \"Normalizing the house table both ways\"",
     "Batch norm normalises each column over the batch; layer norm normalises each row over its "
     "own features.",
     [] { return house_text(house_table()); }, [] { return house_json(house_table()); }},
    {"gradient", "Measuring the gradient through a residual stack",
     "page 000, \"Measuring the gradient through a residual stack\"",
     "Without residuals the gradient shrinks with every layer; with them each factor is I + W "
     "and it keeps its size.",
     [] { return gradient_text(gradient_flow()); }, [] { return gradient_json(gradient_flow()); }},
    {"growth", "Activations drift and explode",
     "page 001, \"The problem: activations drift and explode\"",
     "Without normalization the activations' std grows exponentially with depth; LayerNorm "
     "after every layer holds it at 1.",
     [] { return growth_text(activation_growth()); },
     [] { return growth_json(activation_growth()); }},
    {"steps", "The normalization steps with a learned scale and shift",
     "page 001, \"How it works\"",
     "LayerNorm step by step on [2, -3, 1, 4] with gamma = 2, beta = 0.5: exact values and the "
     "page's 2-decimal hand arithmetic.",
     [] { return steps_text(normalization_steps()); },
     [] { return steps_json(normalization_steps()); }},
    {"block", "Placing Add & Norm: pre-norm and post-norm blocks",
     "page 000, \"Placing Add & Norm\"; page 001, class TransformerBlock",
     "Pre-norm keeps the skip path an identity, out = x + F(LN(x)); post-norm normalises the "
     "sum, out = LN(x + F(x)).",
     [] { return blocks_text(residual_blocks()); }, [] { return blocks_json(residual_blocks()); }},
    {"rmsnorm", "RMSNorm beside LayerNorm", "page 001, classes LayerNorm and RMSNorm",
     "RMSNorm rescales by the root mean square without centring; LayerNorm centres, then "
     "rescales.",
     [] { return rms_text(rms_vs_layer_norm()); }, [] { return rms_json(rms_vs_layer_norm()); }},
}};

}  // namespace

std::span<const TourSection> tour_sections() {
  return kSections;
}

std::string tour_section_names() {
  std::string names;
  for (const TourSection& section : kSections) {
    if (!names.empty()) names += ", ";
    names += section.name;
  }
  return names;
}

const TourSection& find_tour_section(std::string_view name) {
  for (const TourSection& section : kSections) {
    if (name == section.name) return section;
  }
  throw Error("section \"" + std::string(name) +
              "\" is not a tour section; expected one of: " + tour_section_names());
}

std::string tour_section_text(const TourSection& section) {
  const size_t number = static_cast<size_t>(&section - kSections.data()) + 1;
  std::string text = "== " + std::to_string(number) + "/" + std::to_string(kSections.size()) + " " +
                     section.name + ": " + section.title + " ==\n";
  text += "(";
  text += section.source;
  text += ")\n";
  text += section.summary;
  text += "\n\n";
  return text + section.body();
}

std::string tour_text() {
  std::string text =
      "addnorm tour: the worked examples of the seed pages \"Residual connections and layer "
      "normalization\" (000)\nand \"Layer Norm & Residuals\" (001), computed with the addnorm "
      "ops in float32 (the pages' NumPy runs are float64).\nOne section: addnorm tour --section "
      "NAME, NAME one of: " +
      tour_section_names() + "\n";
  for (const TourSection& section : kSections) {
    text += "\n";
    text += tour_section_text(section);
  }
  return text;
}

nlohmann::json tour_section_json(const TourSection& section) {
  nlohmann::json numbers = section.numbers();
  numbers["title"] = section.title;
  numbers["source"] = section.source;
  numbers["summary"] = section.summary;
  return numbers;
}

nlohmann::json tour_json() {
  nlohmann::json all = nlohmann::json::object();
  for (const TourSection& section : kSections) all[section.name] = tour_section_json(section);
  return all;
}

}  // namespace addnorm::tour
