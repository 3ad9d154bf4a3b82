# SPDX-License-Identifier: GPL-2.0
# Installation of librbln: headers under <prefix>/include/rbln, librbln.so
# (with its soname) and librbln.a, a pkg-config file rbln.pc and a CMake
# package rbln (rblnConfig.cmake, rblnConfigVersion.cmake) with the imported
# targets rbln::rbln (shared) and rbln::rbln_static.
#
# Both files are relocatable: rbln.pc finds the prefix from ${pcfiledir} and
# rblnConfig.cmake from its own location, so `cmake --install --prefix DIR`
# and DESTDIR work without reconfiguring.
#
# The build targets link rbln_contracts and the PkgConfig:: targets, which
# carry source-tree paths, so they are not exported with install(EXPORT);
# the package config declares imported targets on the installed files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RBLN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/rbln)
set(RBLN_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
set(rbln_gen ${CMAKE_CURRENT_BINARY_DIR}/install-gen)

install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/rbln
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT rbln_devel
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(TARGETS rbln_shared
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT rbln_runtime
                NAMELINK_COMPONENT rbln_devel)
install(TARGETS rbln
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT rbln_devel)

# pkg-config: the prefix relative to the directory of rbln.pc.  A static
# link (pkg-config --static) also needs libdrm, liburing and the C++
# runtime, since librbln is C++.
file(RELATIVE_PATH rbln_pc_up /${RBLN_INSTALL_PKGCONFIGDIR} /)
string(REGEX REPLACE "/$" "" rbln_pc_up "${rbln_pc_up}")
file(CONFIGURE OUTPUT ${rbln_gen}/rbln.pc @ONLY CONTENT [=[
prefix=${pcfiledir}/@rbln_pc_up@
exec_prefix=${prefix}
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: rbln
Description: librbln, the user-mode driver library of the rbln NPU stack
Version: @PROJECT_VERSION@
Requires.private: libdrm liburing
Libs: -L${libdir} -lrbln
Libs.private: -lstdc++
Cflags: -I${includedir}
]=])

# CMake package.  The template goes through configure_package_config_file,
# which supplies PACKAGE_PREFIX_DIR and set_and_check().
set(RBLN_CONFIG_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
set(RBLN_CONFIG_LIBDIR ${CMAKE_INSTALL_LIBDIR})
file(WRITE ${rbln_gen}/rblnConfig.cmake.in [=[
# rblnConfig.cmake - CMake package of librbln.
#   find_package(rbln 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE rbln::rbln)         # librbln.so
#   target_link_libraries(app PRIVATE rbln::rbln_static)  # librbln.a
@PACKAGE_INIT@

set_and_check(rbln_INCLUDE_DIR "@PACKAGE_RBLN_CONFIG_INCLUDEDIR@")
set_and_check(rbln_LIBRARY_DIR "@PACKAGE_RBLN_CONFIG_LIBDIR@")

if(NOT TARGET rbln::rbln)
  add_library(rbln::rbln SHARED IMPORTED)
  set_target_properties(rbln::rbln PROPERTIES
    IMPORTED_LOCATION "${rbln_LIBRARY_DIR}/librbln.so.@PROJECT_VERSION@"
    IMPORTED_SONAME "librbln.so.@PROJECT_VERSION_MAJOR@"
    INTERFACE_INCLUDE_DIRECTORIES "${rbln_INCLUDE_DIR}"
    INTERFACE_COMPILE_FEATURES cxx_std_20)
endif()
if(NOT TARGET rbln::rbln_static)
  add_library(rbln::rbln_static STATIC IMPORTED)
  set_target_properties(rbln::rbln_static PROPERTIES
    IMPORTED_LOCATION "${rbln_LIBRARY_DIR}/librbln.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    INTERFACE_INCLUDE_DIRECTORIES "${rbln_INCLUDE_DIR}"
    INTERFACE_COMPILE_FEATURES cxx_std_20
    INTERFACE_LINK_LIBRARIES "drm;uring")
endif()

set(rbln_LIBRARIES rbln::rbln)
check_required_components(rbln)
]=])
configure_package_config_file(${rbln_gen}/rblnConfig.cmake.in ${rbln_gen}/rblnConfig.cmake
  INSTALL_DESTINATION ${RBLN_INSTALL_CMAKEDIR}
  PATH_VARS RBLN_CONFIG_INCLUDEDIR RBLN_CONFIG_LIBDIR)
# 0.x: the soname carries the major version, so does compatibility.
write_basic_package_version_file(${rbln_gen}/rblnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)

install(FILES ${rbln_gen}/rbln.pc
        DESTINATION ${RBLN_INSTALL_PKGCONFIGDIR} COMPONENT rbln_devel)
install(FILES ${rbln_gen}/rblnConfig.cmake ${rbln_gen}/rblnConfigVersion.cmake
        DESTINATION ${RBLN_INSTALL_CMAKEDIR} COMPONENT rbln_devel)
