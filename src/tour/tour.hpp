// The tour's table of contents: every section of `addnorm tour`, in the seed pages' order (page
// 000 first, then page 001), each with a short name for `--section NAME`, a one-line summary,
// its text and its numbers as JSON. Nothing here prints; the command line does.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

namespace addnorm::tour {

struct TourSection {
  const char* name;             // what `--section` takes: "cat"
  const char* title;            // the header
  const char* source;           // the page and part it comes from
  const char* summary;          // one line: what the section shows
  std::string (*body)();        // the section's text, computed when called
  nlohmann::json (*numbers)();  // the section's numbers, computed when called
};

std::span<const TourSection> tour_sections();
// "residual, cat, house, ..." in tour order.
std::string tour_section_names();
// The section called `name`; throws addnorm::Error listing the valid names when there is none.
const TourSection& find_tour_section(std::string_view name);

// A section with its header ("== 2/8 cat: ... =="), source, summary and body.
std::string tour_section_text(const TourSection& section);
// The whole tour: an introduction, then every section.
std::string tour_text();
// One object keyed by section name; each holds the title, source, summary and the numbers.
nlohmann::json tour_section_json(const TourSection& section);
nlohmann::json tour_json();

}  // namespace addnorm::tour
