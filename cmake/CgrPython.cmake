# Finds what the Python module cgr._cgr needs (python/): a Python with its development files
# and nanobind. CGR_BUILD_PYTHON is AUTO by default: the module is built when both are found
# and skipped with a status message otherwise; ON makes a missing piece an error.
#
# Outside scikit-build-core the interpreter is Debian's /usr/bin/python3 (it has torch and
# numpy), and nanobind is looked up with CGR_PYTHON_DEPS_DIR on its path, where
# scripts/install-deps.sh --tests installs it. Under scikit-build-core (pip install .) the
# interpreter is the one pip runs and nanobind comes from its build environment.
set(CGR_BUILD_PYTHON AUTO CACHE STRING
    "Build the Python module cgr._cgr (nanobind): AUTO (when nanobind is found), ON or OFF")
set_property(CACHE CGR_BUILD_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(CGR_PYTHON_DEPS_DIR /opt/cgr/python CACHE PATH
    "Where scripts/install-deps.sh --tests installs the Python packages PyPI provides")

set(CGR_HAVE_PYTHON OFF)
if(CGR_BUILD_PYTHON)
  set(_cgr_python_required "${CGR_BUILD_PYTHON}")
  if(_cgr_python_required STREQUAL "AUTO")
    set(_cgr_python_required OFF)
  endif()
  if(NOT DEFINED Python_EXECUTABLE AND NOT SKBUILD AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python 3.8 COMPONENTS Interpreter Development.Module)
  set(_cgr_python_why "")
  if(CMAKE_CXX_FLAGS MATCHES "-fsanitize")
    string(CONCAT _cgr_python_why "this is a sanitizer build (an instrumented module cannot "
                                  "load into the uninstrumented interpreter)")
  elseif(NOT CGR_ENABLE_ONNX)
    set(_cgr_python_why "CGR_ENABLE_ONNX is OFF (engines come to Python as ONNX models)")
  elseif(NOT Python_FOUND)
    string(CONCAT _cgr_python_why "there is no Python 3.8+ with its development files "
                                  "(Debian: python3-dev)")
  else()
    # nanobind tells CMake where its package configuration is.
    set(_cgr_python_path "${CGR_PYTHON_DEPS_DIR}")
    if(DEFINED ENV{PYTHONPATH})
      string(APPEND _cgr_python_path ":$ENV{PYTHONPATH}")
    endif()
    execute_process(
      COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${_cgr_python_path}"
              "${Python_EXECUTABLE}" -c "import nanobind; print(nanobind.cmake_dir())"
      OUTPUT_VARIABLE _cgr_nanobind_dir OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _cgr_nanobind_status ERROR_QUIET)
    if(_cgr_nanobind_status EQUAL 0)
      find_package(nanobind CONFIG PATHS "${_cgr_nanobind_dir}" NO_DEFAULT_PATH)
    endif()
    if(NOT nanobind_FOUND)
      string(CONCAT _cgr_python_why
             "there is no nanobind for ${Python_EXECUTABLE} (scripts/install-deps.sh --tests puts it in "
             "${CGR_PYTHON_DEPS_DIR})")
    endif()
  endif()
  if(_cgr_python_why STREQUAL "")
    set(CGR_HAVE_PYTHON ON)
    message(STATUS "cgr: Python module for ${Python_EXECUTABLE} (Python ${Python_VERSION}, "
                   "nanobind ${nanobind_VERSION})")
  elseif(_cgr_python_required)
    message(FATAL_ERROR "cgr: CGR_BUILD_PYTHON is ON, but ${_cgr_python_why}")
  else()
    set(CGR_PYTHON_SKIP_REASON "the module was not built: ${_cgr_python_why}")
    message(STATUS "cgr: the Python module is not built: ${_cgr_python_why}")
  endif()
else()
  set(CGR_PYTHON_SKIP_REASON "the module was not built: CGR_BUILD_PYTHON is OFF")
endif()
