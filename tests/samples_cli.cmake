# Every sample answers --help (exit 0, its options listed) and refuses a bad argument with its
# name, the problem and exit status 2. Invoked by CTest with -DSAMPLES="path;path;...".
foreach(sample IN LISTS SAMPLES)
  get_filename_component(name "${sample}" NAME)
  execute_process(COMMAND "${sample}" --help RESULT_VARIABLE status OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT status EQUAL 0 OR NOT out MATCHES "Usage: ${name} \\[OPTIONS\\]" OR NOT out MATCHES "--device"
     OR NOT out MATCHES "--verbose")
    message(FATAL_ERROR "${name} --help: exit ${status}\n${out}${err}")
  endif()
  foreach(bad "--bogus" "--iterations;0" "--device;tpu" "--threads")
    execute_process(COMMAND "${sample}" ${bad} RESULT_VARIABLE status OUTPUT_VARIABLE out
                    ERROR_VARIABLE err)
    if(NOT status EQUAL 2 OR NOT err MATCHES "^${name}: ")
      message(FATAL_ERROR "${name} ${bad}: exit ${status}, expected 2 with '${name}: ...'\n${err}")
    endif()
  endforeach()
endforeach()

# Without a usable GPU (this build or machine) a sample says so in one line, cgr-bench's; the
# driver's words only with --verbose. A machine with a GPU prints neither.
foreach(sample IN LISTS SAMPLES)
  get_filename_component(name "${sample}" NAME)
  if(name STREQUAL "two_branch")
    foreach(verbose "" "--verbose")
      execute_process(COMMAND "${sample}" --size 8 --width 4 --iterations 1 ${verbose}
                      RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
      if(NOT status EQUAL 0 OR out MATCHES "GPU not used")
        message(FATAL_ERROR "${name} ${verbose}: exit ${status}\n${out}${err}")
      endif()
      if(out MATCHES "running on the CPU executor")
        if(NOT out MATCHES "no usable CUDA device; running on the CPU executor")
          message(FATAL_ERROR "${name} ${verbose}: not cgr-bench's wording\n${out}")
        endif()
        if(verbose STREQUAL "" AND NOT out MATCHES "executor \\(--verbose says why\\)\n")
          message(FATAL_ERROR "${name}: the driver's words without --verbose\n${out}")
        endif()
        if(verbose STREQUAL "--verbose" AND out MATCHES "--verbose says why")
          message(FATAL_ERROR "${name} --verbose: no reason given\n${out}")
        endif()
      endif()
    endforeach()
  endif()
endforeach()

# --dot writes the engine's graph (after fusion, cgr-bench's drawing: tooltips carry the full
# fused names); --dot-before-fusion the network's layers (two_branch: 13 layers, 7 ops).
foreach(sample IN LISTS SAMPLES)
  get_filename_component(name "${sample}" NAME)
  if(name STREQUAL "two_branch")
    set(dot "${CMAKE_CURRENT_BINARY_DIR}/samples_cli_two_branch.dot")
    foreach(before "" "--dot-before-fusion")
      file(REMOVE "${dot}")
      execute_process(COMMAND "${sample}" --device cpu --size 8 --width 4 --iterations 1 --dot
                              "${dot}" ${before}
                      RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
      if(NOT status EQUAL 0 OR NOT EXISTS "${dot}")
        message(FATAL_ERROR "${name} --dot ${before}: exit ${status}\n${out}${err}")
      endif()
      file(READ "${dot}" text)
      string(REGEX MATCHALL "tooltip=" tooltips "${text}")
      string(REGEX MATCHALL "fillcolor=" nodes "${text}")  # one per node
      list(LENGTH tooltips tooltip_count)
      list(LENGTH nodes node_count)
      if(before STREQUAL "" AND (NOT tooltip_count EQUAL 7 OR NOT text MATCHES "conv1\\+conv1.relu"))
        message(FATAL_ERROR "${name} --dot: not the engine's 7 ops with tooltips\n${text}")
      endif()
      if(before STREQUAL "--dot-before-fusion" AND (NOT node_count EQUAL 13 OR tooltip_count GREATER 0))
        message(FATAL_ERROR "${name} --dot --dot-before-fusion: not the 13 layers\n${text}")
      endif()
    endforeach()
  endif()
endforeach()
