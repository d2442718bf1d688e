// `addnorm tour`: prints the seed pages' worked examples, all of them or one `--section`, as
// text or as JSON (`--json`). The numbers come from the addnorm_tour library.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "tour/tour.hpp"

namespace addnorm::cli {
namespace {

struct TourOptions {
  std::string section;  // empty: every section
  bool json = false;
  bool list = false;
};

void run_tour(const TourOptions& options) {
  if (options.list) {
    for (const tour::TourSection& section : tour::tour_sections()) {
      std::cout << section.name << ": " << section.summary << "\n";
    }
    return;
  }
  if (options.section.empty()) {
    if (options.json) {
      std::cout << tour::tour_json().dump(2) << "\n";
    } else {
      std::cout << tour::tour_text();
    }
    return;
  }
  // Looked up first, so an unknown name fails before anything is printed.
  const tour::TourSection& section = tour::find_tour_section(options.section);
  if (options.json) {
    const nlohmann::json one = {{section.name, tour::tour_section_json(section)}};
    std::cout << one.dump(2) << "\n";
  } else {
    std::cout << tour::tour_section_text(section);
  }
}

}  // namespace

void add_tour_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "tour", "Walk through the seed pages' worked examples, computed with the addnorm ops");
  auto options = std::make_shared<TourOptions>();
  command->add_option("--section", options->section,
                      "Show one section: " + tour::tour_section_names());
  command->add_flag("--json", options->json, "Print the numbers as JSON, one object per section");
  command->add_flag("--list", options->list, "List the sections with one line on each");
  command->callback([options] { run_tour(*options); });
}

}  // namespace addnorm::cli
