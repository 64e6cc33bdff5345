# Installs the cgr build into a scratch prefix, then configures, builds and runs the consumer
# project against it. A build without CUDA must install a package that needs nothing of CUDA.
# Invoked by CTest with -DCGR_BUILD_DIR, -DCONSUMER_SOURCE, -DWORK_DIR, -DGENERATOR,
# -DCXX_FLAGS, -DLINKER_FLAGS, -DCGR_HAVE_CUDA, -DCGR_BUILD_BENCH, -DCGR_BUILD_SAMPLES.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${CGR_BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE status OUTPUT_QUIET)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${status}")
endif()
# The installed tools run from the prefix (their RUNPATH finds lib/libcgr.so there):
# bin/cgr-bench, and the samples under libexec/cgr/samples (generic names, kept off bin/).
set(tools)
if(CGR_BUILD_BENCH)
  list(APPEND tools "bin/cgr-bench")
endif()
if(CGR_BUILD_SAMPLES)
  foreach(sample resnet18 two_branch resnet18_exits inception)
    list(APPEND tools "libexec/cgr/samples/${sample}")
  endforeach()
endif()
foreach(tool IN LISTS tools)
  execute_process(COMMAND "${WORK_DIR}/prefix/${tool}" --help RESULT_VARIABLE status
                  OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "the installed ${tool} --help: ${status}\n${err}")
  endif()
endforeach()
if(NOT CGR_HAVE_CUDA)
  file(GLOB package_files "${WORK_DIR}/prefix/lib/cmake/cgr/*.cmake")
  foreach(package_file IN LISTS package_files)
    file(READ "${package_file}" text)
    if(text MATCHES "CUDAToolkit|CUDA::|CUDNN|cudnn|cublas")
      message(FATAL_ERROR "${package_file} of a build without CUDA mentions CUDA")
    endif()
  endforeach()
  if(EXISTS "${WORK_DIR}/prefix/include/cgr/capture/cuda_check.hpp")
    message(FATAL_ERROR "a build without CUDA installed the CUDA headers")
  endif()
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE}" -B "${WORK_DIR}/build"
                        -G "${GENERATOR}" -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
                        "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}"
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "configuring the consumer project failed: ${status}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "building the consumer project failed: ${status}")
endif()
execute_process(COMMAND "${WORK_DIR}/build/consumer" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the consumer failed: ${status}")
endif()
