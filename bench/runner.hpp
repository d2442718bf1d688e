// One implementation of one case, ready to run: everything it needs (primitives, graphs, saved
// statistics, scratch) is built by its factory before timing, so run() does only the op.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench_case.hpp"
#include "workspace.hpp"

namespace addnorm::bench {

struct Runner {
  // addnorm, addnorm-p0, plain, reference, onednn, torch, torch-tuned, textbook, or a ceiling
  std::string impl;
  std::string note;  // what it runs when that is not obvious ("binary add + layer_normalization")
  std::function<void()> run;
};

// Each factory appends a runner when it implements the case's op and storage type, nothing
// otherwise. They may run the op once (or a forward) to prepare saved statistics.
void add_addnorm_runners(const Case& c, Workspace& ws, std::vector<Runner>& out);
// "addnorm-p0": addnorm's post-norm ops with dropout p = 0 (no mask drawn), beside the p = 0.1
// runs, so that a run measures what the dropout mask costs (its time over this one's).
void add_addnorm_no_dropout_runners(const Case& c, Workspace& ws, std::vector<Runner>& out);
void add_reference_runners(const Case& c, Workspace& ws, std::vector<Runner>& out);
void add_textbook_runners(const Case& c, Workspace& ws, std::vector<Runner>& out);
// "plain": the straightforward SIMD loop (impl_plain.cpp), the speed targets' reference; checked
// against the float64 reference when it is built (throws std::runtime_error if it is off).
void add_plain_runners(const Case& c, Workspace& ws, std::vector<Runner>& out);
void add_onednn_runners(const Case& c, Workspace& ws, std::vector<Runner>& out);
// label: "torch" (malloc as installed) or "torch-tuned" (glibc's allocator tuned, main.cpp).
void add_torch_runners(const Case& c, Workspace& ws, const std::string& label,
                       std::vector<Runner>& out);

// Runs addnorm's forward once so the backward cases find saved statistics (mean, rstd, and h
// for the pre-norm backward) in the workspace, as they would after a training forward.
void prepare_saved_stats(const Case& c, Workspace& ws);

// Thread counts for the libraries that keep their own setting.
void set_torch_threads(int threads);
std::string torch_version();

// The SIMD target addnorm's kernels dispatch to on this CPU (Highway's name, "AVX3_ZEN4", ...).
std::string addnorm_simd_target();

}  // namespace addnorm::bench
