// JSON for the parameters the transformer experiments share (model shape, placements, task).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/sequence_task.hpp"
#include "lab/json_params.hpp"

namespace addnorm::lab {

inline nlohmann::json placements_json(const std::vector<nn::Placement>& placements) {
  std::vector<std::string> names;
  for (nn::Placement p : placements) names.push_back(std::string(nn::placement_name(p)));
  return names;
}

inline void read_placements(JsonParams& reader, const nlohmann::json& object,
                            std::vector<nn::Placement>& placements) {
  std::vector<std::string> names;
  reader.read("placements", names);
  if (!object.contains("placements")) return;
  placements.clear();
  for (const std::string& name : names) placements.push_back(nn::parse_placement(name));
}

inline void read_shape(JsonParams& reader, ModelShape& shape) {
  reader.read("d_model", shape.d_model);
  reader.read("n_heads", shape.n_heads);
  reader.read("d_ff", shape.d_ff);
  std::string sublayers = sublayers_name(shape.sublayers);
  reader.read("sublayers", sublayers);
  shape.sublayers = parse_sublayers(sublayers);
}

// The keys read_shape reads, added to an experiment's parameter object.
inline void add_shape_json(nlohmann::json& object, const ModelShape& shape) {
  object["d_model"] = shape.d_model;
  object["n_heads"] = shape.n_heads;
  object["d_ff"] = shape.d_ff;
  object["sublayers"] = sublayers_name(shape.sublayers);
}

inline void read_task(JsonParams& reader, SequenceTask& task) {
  std::string name = sequence_task_name(task);
  reader.read("task", name);
  task = parse_sequence_task(name);
}

// Each placement at most once.
inline void check_distinct(const std::vector<nn::Placement>& placements) {
  for (size_t i = 0; i < placements.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (placements[i] == placements[j]) {
        throw Error("placements lists " + std::string(nn::placement_name(placements[i])) +
                    " twice, expected each placement at most once");
      }
    }
  }
}

}  // namespace addnorm::lab
