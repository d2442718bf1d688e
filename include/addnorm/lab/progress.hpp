// What every lab experiment shares: a progress callback (the experiments never print; a caller
// that wants a progress bar passes one) and the error type for bad parameters.
#pragma once

#include <functional>
#include <string_view>

#include "addnorm/error.hpp"

namespace addnorm::lab {

// Called with the fraction of the work done, in [0, 1], and a short name of the current stage.
// Calls come from the calling thread, in order; an empty function is never called.
using Progress = std::function<void(double fraction, std::string_view stage)>;

}  // namespace addnorm::lab
