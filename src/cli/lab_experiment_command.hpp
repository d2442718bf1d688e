// The `addnorm lab-run NAME` command of an experiment that has a --quick setting and reports
// progress (the transformer experiments): its options from the parameter table, --quick, the
// output options, and a callback that starts from the defaults or the quick setting, applies the
// options typed, validates, runs with a progress bar and prints text, JSON or CSV. Each
// experiment's file keeps what is its own: the name, the help and the text view.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/lab_param_options.hpp"
#include "cli/lab_render.hpp"

namespace addnorm::cli {

// What a command may change between the options and validation (depth-training cuts a warmup
// longer than a shortened run); nothing by default.
struct KeepParams {
  template <class Params>
  void operator()(Params&, const ParamOptions<Params>&) const {}
};

// quick() -> Params; run(const Params&, const lab::Progress&) -> Result; render(const Result&)
// -> text. lab::validate, lab::to_json and lab::to_csv are found for Params and Result.
template <class Params, class Fields, class Quick, class Run, class Render,
          class Adjust = KeepParams>
void add_experiment_command(CLI::App& lab_run, const char* name, const char* help, Fields fields,
                            Quick quick, const char* quick_help, Run run, Render render,
                            Adjust adjust = {}) {
  struct Options {
    std::unique_ptr<ParamOptions<Params>> params;
    bool quick = false;
    OutputOptions output;
  };
  CLI::App* command = lab_run.add_subcommand(name, help);
  auto options = std::make_shared<Options>();
  options->params = std::make_unique<ParamOptions<Params>>(*command, fields, Params{});
  command->add_flag("--quick", options->quick, quick_help);
  add_output_options(*command, options->output);
  command->callback([options, quick, run, render, adjust] {
    Params params = options->quick ? quick() : Params{};
    options->params->apply(params);
    adjust(params, *options->params);
    lab::validate(params);
    ProgressBar bar;
    const auto result = run(params, bar.progress());
    bar.finish();
    print_result(options->output, lab::to_json(result), lab::to_csv(result), render(result));
  });
}

}  // namespace addnorm::cli
