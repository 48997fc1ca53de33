# cmake --install: the installed layout (GNUInstallDirs; docs/architecture.md, "Installed
# layout"). Each rule's COMPONENT names the Debian package it goes to (scripts/package.sh):
#   runtime  libnvmf_host.so.0                                    -> libnvmf-host0
#   dev      include/nvmf, libnvmf_host.so and .a, nvmf_host.pc,
#            nvmfConfig.cmake, the example applications           -> libnvmf-host-dev
#   target   nvmf_tgt, nvmfctl, example configs, docs, its unit   -> nvmf-target
#   tools    nvmf_perf, nvmf_hostd, its unit                      -> nvmf-tools
# Nothing here needs the test dependencies (gtest, benchmark).
include(CMakePackageConfigHelpers)

set(NVMF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/nvmf)
set(NVMF_INSTALL_EXAMPLESDIR ${CMAKE_INSTALL_DATADIR}/nvmf/examples)

# nvmf_static_link_items(OUT_PC OUT_CMAKE ITEMS...)
# What an application linking libnvmf_host.a must add for ITEMS (NVMF_HOST_EXTERNAL_LIBS):
# OUT_PC as pkg-config Libs.private flags, OUT_CMAKE as INTERFACE_LINK_LIBRARIES of the
# imported static target. Imported targets of pkg-config modules give their libraries by
# full path; those become -l<name>, since the installed files must not name this machine's.
function(nvmf_static_link_items out_pc out_cmake)
  set(pc_flags)
  set(cmake_items)
  foreach(item IN LISTS ARGN)
    if(item STREQUAL "Threads::Threads")
      list(APPEND pc_flags -pthread)
      list(APPEND cmake_items Threads::Threads)
      continue()
    endif()
    set(libraries ${item})
    if(TARGET ${item})
      get_target_property(libraries ${item} INTERFACE_LINK_LIBRARIES)
    endif()
    foreach(library IN LISTS libraries)
      if(library MATCHES "^(.*/)?lib([^/]+)\\.(so|a)(\\.[0-9.]+)?$")
        set(library -l${CMAKE_MATCH_2})
      elseif(NOT library MATCHES "^-")
        set(library -l${library})
      endif()
      list(APPEND pc_flags ${library})
      list(APPEND cmake_items ${library})
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES pc_flags)
  list(REMOVE_DUPLICATES cmake_items)
  list(JOIN pc_flags " " pc_flags)
  set(${out_pc} "${pc_flags}" PARENT_SCOPE)
  set(${out_cmake} "${cmake_items}" PARENT_SCOPE)
endfunction()

# --- the host library ------------------------------------------------------------------
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/nvmf DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(TARGETS nvmf_host_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(FILES ${NVMF_HOST_ARCHIVE} DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)

nvmf_static_link_items(NVMF_HOST_PC_LIBS_PRIVATE NVMF_HOST_CMAKE_STATIC_LINK
                       ${NVMF_HOST_EXTERNAL_LIBS})

# nvmf_host.pc finds its prefix from its own place (${pcfiledir}), so that a copy installed
# with `cmake --install --prefix` or unpacked from a package elsewhere stays right.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "nvmf_host.pc needs a CMAKE_INSTALL_LIBDIR relative to the prefix")
endif()
file(RELATIVE_PATH NVMF_PC_PREFIX_FROM_PCFILEDIR
     /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" NVMF_PC_PREFIX_FROM_PCFILEDIR "${NVMF_PC_PREFIX_FROM_PCFILEDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/nvmf_host.pc.in
               ${PROJECT_BINARY_DIR}/install/nvmf_host.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/nvmf_host.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nvmfConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/nvmfConfig.cmake
  INSTALL_DESTINATION ${NVMF_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
# SameMajorVersion: the same rule as the SONAME (libnvmf_host.so.<major>).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/nvmfConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/nvmfConfig.cmake
              ${PROJECT_BINARY_DIR}/install/nvmfConfigVersion.cmake
        DESTINATION ${NVMF_INSTALL_CMAKEDIR} COMPONENT dev)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/app_common ${PROJECT_SOURCE_DIR}/examples/app_cmake
                  ${PROJECT_SOURCE_DIR}/examples/app_pkgconfig
        DESTINATION ${NVMF_INSTALL_EXAMPLESDIR} COMPONENT dev)

# --- the daemons and tools ---------------------------------------------------------------
install(TARGETS nvmf_tgt nvmfctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT target)
install(TARGETS nvmf_perf nvmf_hostd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/target
        DESTINATION ${NVMF_INSTALL_EXAMPLESDIR} COMPONENT target)
install(FILES ${PROJECT_SOURCE_DIR}/README.md
              ${PROJECT_SOURCE_DIR}/docs/architecture.md
              ${PROJECT_SOURCE_DIR}/docs/cli.md
              ${PROJECT_SOURCE_DIR}/docs/target-config.md
              ${PROJECT_SOURCE_DIR}/docs/performance.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT target)
