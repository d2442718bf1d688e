// What libaddnorm.so exports. The library is compiled with hidden visibility
// (cmake/core_library.cmake), so only what a public header declares between these two marks
// leaves the shared library: the kernels, reference definitions and shared checks stay inside,
// where they cannot clash with a program's own symbols. For a program using the headers the
// marks change nothing.
#pragma once

#define ADDNORM_PUBLIC_BEGIN _Pragma("GCC visibility push(default)")
#define ADDNORM_PUBLIC_END _Pragma("GCC visibility pop")
