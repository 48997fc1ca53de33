# Helpers shared by every layer's CMakeLists.

# nvmf_add_gtest(NAME SOURCES... LIBS libs... LABEL label)
# One gtest binary; every TEST in it becomes its own ctest entry with the given label.
function(nvmf_add_gtest name)
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  gtest_discover_tests(${name}
    PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
endfunction()

# nvmf_add_benchmark(NAME SOURCES... LIBS libs...)
# A Google Benchmark binary registered with ctest under label bench (not run by default).
function(nvmf_add_benchmark name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} benchmark::benchmark)
  add_test(NAME ${name} COMMAND ${name} --benchmark_min_time=0.2
           --benchmark_out=${CMAKE_BINARY_DIR}/bench/${name}.json --benchmark_out_format=json)
  set_tests_properties(${name} PROPERTIES LABELS bench)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endfunction()
