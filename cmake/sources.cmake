# The source lists of the core library, nn and the lab, defined once: the native build
# (cmake/core_library.cmake, src/nn/, src/lab/) and the WebAssembly build (wasm/) compile the
# same files.
get_filename_component(addnorm_source_root ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
file(GLOB ADDNORM_CORE_SOURCES CONFIGURE_DEPENDS
     ${addnorm_source_root}/src/ops/*.cpp ${addnorm_source_root}/src/ops/reference/*.cpp
     ${addnorm_source_root}/src/ops/cpu/*.cpp ${addnorm_source_root}/src/io/*.cpp
     ${addnorm_source_root}/src/random/*.cpp ${addnorm_source_root}/src/capi/*.cpp)
file(GLOB ADDNORM_NN_SOURCES CONFIGURE_DEPENDS ${addnorm_source_root}/src/nn/*.cpp)
list(FILTER ADDNORM_NN_SOURCES EXCLUDE REGEX ".*_bench\\.cpp$|.*_tool\\.cpp$")
file(GLOB ADDNORM_LAB_SOURCES CONFIGURE_DEPENDS ${addnorm_source_root}/src/lab/*.cpp)
