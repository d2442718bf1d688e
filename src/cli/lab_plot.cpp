// --plot: hand the result's JSON to the plotting script (see lab_plot.hpp).
#include "cli/lab_plot.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "addnorm/error.hpp"

extern char** environ;

namespace addnorm::cli {

std::string check_plot_file(const std::string& file) {
  const std::string extension = std::filesystem::path(file).extension().string();
  if (extension == ".svg" || extension == ".png") return "";
  return "--plot is \"" + file + "\", expected a file name ending in .svg or .png";
}

void plot_result(const nlohmann::json& result, const std::string& file) {
  const char* from_environment = std::getenv("ADDNORM_PLOT_SCRIPT");
  const std::string script = from_environment != nullptr ? from_environment : ADDNORM_PLOT_SCRIPT;
  if (!std::filesystem::exists(script)) {
    throw Error("--plot needs the plotting script " + script +
                " (set ADDNORM_PLOT_SCRIPT to its path)");
  }
  std::string json_path = (std::filesystem::temp_directory_path() / "addnorm-plot-XXXXXX").string();
  const int descriptor = mkstemp(json_path.data());
  if (descriptor < 0) throw Error("--plot could not create a temporary file for the result");
  close(descriptor);
  {
    std::ofstream out(json_path);
    out << result.dump();
  }
  std::vector<std::string> arguments{"/usr/bin/python3", script, json_path, file};
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, argv[0], nullptr, nullptr, argv.data(), environ);
  int status = 0;
  if (spawned == 0) waitpid(child, &status, 0);
  std::filesystem::remove(json_path);
  if (spawned != 0) throw Error("--plot could not run /usr/bin/python3");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(
        "--plot: the plotting script failed (see its message above); is "
        "python3-matplotlib installed?");
  }
}

}  // namespace addnorm::cli
