# systemd units and the Debian packages (CPack DEB), one per install component
# (cmake/install.cmake). scripts/package.sh configures a build folder with
# CMAKE_INSTALL_PREFIX=/usr and builds them; packaging/README.md.

# --- systemd units -----------------------------------------------------------------------
# The units name the installed binaries; tests/install/check_units.sh verifies them and runs
# their command lines against the build tree's binaries.
set(NVMF_BIN_DIR ${CMAKE_INSTALL_FULL_BINDIR})
set(NVMF_DOC_DIR ${CMAKE_INSTALL_FULL_DOCDIR})
set(NVMF_EXAMPLES_DIR ${CMAKE_INSTALL_FULL_DATADIR}/nvmf/examples)
set(NVMF_UNIT_DIR ${PROJECT_BINARY_DIR}/packaging/systemd)
foreach(unit nvmf_tgt nvmf_hostd)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/systemd/${unit}.service.in
                 ${NVMF_UNIT_DIR}/${unit}.service @ONLY)
endforeach()
# lib/systemd/system under the prefix: /usr/lib/systemd/system for the packages (not LIBDIR:
# systemd does not look in the multiarch folder).
install(FILES ${NVMF_UNIT_DIR}/nvmf_tgt.service DESTINATION lib/systemd/system COMPONENT target)
install(FILES ${NVMF_UNIT_DIR}/nvmf_hostd.service DESTINATION lib/systemd/system COMPONENT tools)

# --- Debian packages ---------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME nvmf-rdma)
set(CPACK_PACKAGE_VENDOR nvmf-rdma)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "nvmf-rdma maintainers <nvmf-rdma@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL runtime dev target tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# CPACK_COMPONENT_<NAME>_DEPENDS become Depends on the other package, at the same version.
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
# Depends from the binaries' NEEDED entries (dpkg-shlibdeps): libibverbs1, librdmacm1,
# liburing2, librte-eal23, libstdc++6, libc6 as each binary needs them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libnvmf-host0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
string(CONCAT CPACK_DEBIAN_RUNTIME_DESCRIPTION "NVMe-over-Fabrics RDMA initiator library\n"
       "libnvmf_host.so.0: discovery, controllers, namespaces and I/O queue pairs\n"
       "over rdma-core, in userspace.")
# A shlibs file (for each package with a shared library: libnvmf-host0 alone), so that
# packages built against it depend on libnvmf-host0.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libnvmf-host-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
string(CONCAT CPACK_DEBIAN_DEV_DESCRIPTION
       "NVMe-over-Fabrics RDMA initiator library (development files)\n"
       "Headers (include/nvmf), libnvmf_host.so and libnvmf_host.a, nvmf_host.pc,\n"
       "nvmfConfig.cmake and example applications.")
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
# libnvmf_host.a is linked with -libverbs -lrdmacm (nvmf_host.pc's Libs.private).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libibverbs-dev, librdmacm-dev")

set(CPACK_DEBIAN_TARGET_PACKAGE_NAME nvmf-target)
string(CONCAT CPACK_DEBIAN_TARGET_DESCRIPTION "NVMe-over-Fabrics RDMA target\n"
       "nvmf_tgt (malloc, null, io_uring and NVMe SSD block devices; JSON-RPC\n"
       "control), nvmfctl, example configurations and a systemd unit.")
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME nvmf-tools)
string(CONCAT CPACK_DEBIAN_TOOLS_DESCRIPTION "NVMe-over-Fabrics RDMA host tools\n"
       "nvmf_perf (I/O benchmark) and nvmf_hostd (namespaces as NBD block devices,\n"
       "with a systemd unit).")
# The units: daemon-reload after install and removal, stop and disable before removal.
set(NVMF_MAINTAINER_SCRIPTS ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
                            ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
                            ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_TARGET_PACKAGE_CONTROL_EXTRA ${NVMF_MAINTAINER_SCRIPTS})
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_EXTRA ${NVMF_MAINTAINER_SCRIPTS})
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
