// The subcommands of the addnorm command line; each registers itself on the app and runs from
// its callback, throwing addnorm::Error for bad input.
#pragma once

#include <CLI/CLI.hpp>

namespace addnorm::cli {

void add_tour_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_lab_run_command(CLI::App& app);
void add_lab_server_command(CLI::App& app);

}  // namespace addnorm::cli
