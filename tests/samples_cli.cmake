# Every sample answers --help (exit 0, its options listed) and refuses a bad argument with its
# name, the problem and exit status 2. Invoked by CTest with -DSAMPLES="path;path;...".
foreach(sample IN LISTS SAMPLES)
  get_filename_component(name "${sample}" NAME)
  execute_process(COMMAND "${sample}" --help RESULT_VARIABLE status OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT status EQUAL 0 OR NOT out MATCHES "Usage: ${name} \\[OPTIONS\\]" OR NOT out MATCHES "--device")
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
