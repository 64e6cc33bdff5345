# fmt (header-only mode), doctest, nlohmann-json and CLI11 from CGR_DEPS_DIR/include, as
# imported targets with the names their packages export: for machines without the Debian
# packages.
foreach(header fmt/format.h doctest/doctest.h nlohmann/json.hpp CLI/CLI.hpp)
  if(NOT EXISTS "${CGR_DEPS_DIR}/include/${header}")
    message(FATAL_ERROR "CGR_DEPS_DIR=${CGR_DEPS_DIR} has no include/${header}")
  endif()
endforeach()
add_library(fmt::fmt INTERFACE IMPORTED GLOBAL)
set_target_properties(fmt::fmt PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CGR_DEPS_DIR}/include"
                                          INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED GLOBAL)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
                      INTERFACE_INCLUDE_DIRECTORIES "${CGR_DEPS_DIR}/include")
add_library(doctest::doctest INTERFACE IMPORTED GLOBAL)
set_target_properties(doctest::doctest PROPERTIES
                      INTERFACE_INCLUDE_DIRECTORIES "${CGR_DEPS_DIR}/include")
add_library(CLI11::CLI11 INTERFACE IMPORTED GLOBAL)
set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CGR_DEPS_DIR}/include")
set(CGR_HEADER_ONLY_DEPS ON)
