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
  if(TARGET nvmf_test_pch)  # tests/CMakeLists.txt, NVMF_TEST_PCH
    target_precompile_headers(${name} REUSE_FROM nvmf_test_pch)
  endif()
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

# nvmf_link_closure(TARGET OUT_INTERNAL OUT_EXTERNAL)
# What TARGET links, directly or through the project's own libraries: OUT_INTERNAL gets the
# project's static libraries (each once), OUT_EXTERNAL what lies outside the project (imported
# targets such as PkgConfig::IBVERBS or Threads::Threads, and plain library names). The
# installable host library is built from this one list: its PIC and visibility settings, the
# members of the combined archive, the static link line of nvmf_host.pc and nvmfConfig.cmake.
function(nvmf_link_closure target out_internal out_external)
  set(internal)
  set(external)
  set(visited ${target})
  set(pending ${target})
  while(pending)
    list(POP_FRONT pending current)
    get_target_property(type ${current} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(deps ${current} INTERFACE_LINK_LIBRARIES)
    else()
      get_target_property(deps ${current} LINK_LIBRARIES)
    endif()
    if(NOT deps)
      continue()
    endif()
    foreach(dep IN LISTS deps)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
      if(TARGET ${dep})
        get_target_property(imported ${dep} IMPORTED)
        if(imported)
          list(APPEND external ${dep})
        elseif(NOT dep IN_LIST visited)
          list(APPEND visited ${dep})
          list(APPEND pending ${dep})
          get_target_property(dep_type ${dep} TYPE)
          if(dep_type STREQUAL "STATIC_LIBRARY")
            list(APPEND internal ${dep})
          endif()
        endif()
      else()
        list(APPEND external ${dep})
      endif()
    endforeach()
  endwhile()
  list(REMOVE_DUPLICATES external)
  set(${out_internal} ${internal} PARENT_SCOPE)
  set(${out_external} ${external} PARENT_SCOPE)
endfunction()

# Flags for the control plane's JSON code in src/ (configuration files, target options and
# JSON-RPC: parsed once per request, never on the data path), after the build type's.
# scripts/test.sh gives its sanitizer builds -O0 here, as it does the tests' and the tools'
# code: nlohmann/json's templates make these the slowest library objects of those builds
# (clang 14, ASan+UBSan: src/target/config.cpp 26.7 s at -O1, 10.9 s at -O0). The shipped
# build leaves this empty.
set(NVMF_CONTROL_COMPILE_FLAGS "" CACHE STRING
    "Extra compile flags for the control plane's JSON code in src/ (not the data path), e.g. -O0")
# nvmf_control_plane_sources(FILE...): FILE (of the calling folder) gets those flags.
function(nvmf_control_plane_sources)
  if(NVMF_CONTROL_COMPILE_FLAGS)
    separate_arguments(control_flags UNIX_COMMAND "${NVMF_CONTROL_COMPILE_FLAGS}")
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS "${control_flags}")
  endif()
endfunction()
