# doctest_discover_tests turns each TEST_CASE into a CTest test named after it; CMake splits a
# name at ';' into a list, so such a test would run a filter that matches nothing and pass
# without running. Fails naming every TEST_CASE whose name holds a ';'. Invoked by CTest with
# -DSOURCES_DIR=<tests folder>.
file(GLOB_RECURSE sources "${SOURCES_DIR}/*.cpp")
set(bad "")
foreach(source IN LISTS sources)
  file(READ "${source}" text)
  string(REGEX MATCHALL "TEST_CASE\\(\"[^\"\n]*\"" cases "${text}")
  # A ';' inside a match splits it into list items, so an item that opens a TEST_CASE without
  # closing its quote held one.
  foreach(item IN LISTS cases)
    if(item MATCHES "^TEST_CASE\\(\"[^\"]*$")
      list(APPEND bad "${source}: ${item}...")
    endif()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " message)
  message(FATAL_ERROR "TEST_CASE names with ';' (CTest would run nothing for them):\n  ${message}")
endif()
