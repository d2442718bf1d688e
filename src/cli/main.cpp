// The addnorm command: `addnorm tour` walks through the seed pages' examples, `addnorm run`
// applies an op to .npy files. Errors become a one-line message: exit code 2 for a bad
// command line, 1 for bad input data or arguments the library refuses (also an --eps or
// --momentum that a float32 run cannot hold, which only the inputs' type decides).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "addnorm/error.hpp"

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"addnorm: residual connections, LayerNorm, RMSNorm and BatchNorm, exact and fast"};
  app.require_subcommand(1);
  addnorm::cli::add_tour_command(app);
  addnorm::cli::add_run_command(app);
  addnorm::cli::add_bench_command(app);
  addnorm::cli::add_lab_run_command(app);
  addnorm::cli::add_lab_server_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help: print it, succeed
    std::cerr << "addnorm: error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const addnorm::Error& e) {  // named as the command line names it: --weight, not gamma
    std::cerr << "addnorm: error: " << addnorm::face_message(e) << "\n";
    return 1;
  } catch (const std::exception& e) {  // I/O failures
    std::cerr << "addnorm: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
